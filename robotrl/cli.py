"""The ``robotrl`` console script: subcommands taking Hydra ``key=value`` overrides.

Every subcommand composes its config from ``robotrl/conf``, writes its outputs under
``outputs/<date>/<time>-<name>/`` where it produces files, shows progress on stderr and ends
with one JSON line on stdout. This is the only place configs are turned into objects.

``robotrl <cmd> --help`` lists every config key with its default and meaning. Unknown keys are
errors that name the closest valid ones; a bad input of any kind ends in one line on stderr and
exit code 2 (1 is "ran, found damage"), the traceback only with ``--debug`` or
``ROBOTRL_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from omegaconf import DictConfig

from robotrl import config_help
from robotrl.commands import BENCHMARKS, COMMANDS, DATASET_ACTIONS, Command
from robotrl.config_help import compose
from robotrl.run import emit_summary

HELP_FLAGS = ("-h", "--help")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="robotrl",
        description="Robot learning: BC pretraining, residual RL, flow policy gradients, "
        "impedance control and safety. Subcommands take Hydra key=value overrides; "
        "'robotrl <command> --help' lists every config key with its default and meaning.",
    )
    p.add_argument(
        "--debug",
        action="store_true",
        help="show the full traceback of an error (also after the subcommand, or ROBOTRL_DEBUG=1)",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="command")
    for name, (_, _, help_) in COMMANDS.items():
        c = sub.add_parser(name, help=help_)
        c.add_argument("overrides", nargs="*", help="key=value config overrides")
    ds = sub.add_parser(
        "dataset",
        help="inspect, verify and repair episode stores",
        epilog="'robotrl dataset <action> --help' lists the config keys; the first bare "
        "argument is the store's path (robotrl dataset verify data/lift.zarr)",
    )
    ds.add_argument("action", choices=sorted(DATASET_ACTIONS))
    ds.add_argument("overrides", nargs="*", help="[PATH] key=value config overrides")
    bench = sub.add_parser(
        "bench",
        help="benchmarks that print JSON",
        epilog="'robotrl bench <name> --help' lists the config keys",
    )
    bench.add_argument("benchmark", choices=sorted(BENCHMARKS))
    bench.add_argument("overrides", nargs="*", help="key=value config overrides")
    return p


def _lookup(argv: Sequence[str]) -> tuple[str, tuple[str, Command, str], int] | None:
    """(label such as ``dataset verify``, its COMMANDS-style entry, index of its first
    override) for a known command line, else None."""
    if not argv:
        return None
    if argv[0] in COMMANDS:
        return argv[0], COMMANDS[argv[0]], 1
    table = {"dataset": DATASET_ACTIONS, "bench": BENCHMARKS}.get(argv[0])
    if table is not None and len(argv) > 1 and argv[1] in table:
        return f"{argv[0]} {argv[1]}", table[argv[1]], 2
    return None


def _with_positional(label: str, config_name: str, overrides: Sequence[str]) -> list[str]:
    """Overrides with a bare first argument turned into ``<positional key>=<it>``."""
    key = config_help.positional_key(config_name)
    out: list[str] = []
    given: str | None = None
    for o in overrides:
        # '~key' deletes a key; '~/dir' is a path the shell left unexpanded
        if "=" in o or (o.startswith("~") and not o.startswith("~/")):
            out.append(o)
        elif key is not None and given is None:
            given = o
            out.append(f"{key}={config_help.quote_value(o)}")
        elif key is not None:
            raise config_help.ConfigKeyError(
                f"{o!r} is not an override: robotrl {label} takes one {key.upper()} "
                "and key=value overrides"
            )
        else:
            raise config_help.ConfigKeyError(
                f"{o!r} is not an override; overrides are key=value "
                f"(robotrl {label} --help lists every key)"
            )
    if given is not None and any(o.split("=", 1)[0].lstrip("+") == key for o in overrides):
        raise config_help.ConfigKeyError(f"{key} given twice: as {given!r} and as {key}=...")
    return out


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    more = f" …({len(lines) - 1} more lines; --debug)" if len(lines) > 1 else ""
    return lines[0] + more


def describe_error(exc: BaseException) -> str:
    """The one line a user sees for ``exc``: its message for the kinds of error that bad
    inputs raise, type and a --debug hint for anything else."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from robotrl.datasets import EpisodeStoreError  # lazy: `robotrl --help` stays free of zarr

    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        # "[Errno 2] No such file or directory: 'x'" -> "No such file or directory: x"
        return f"{exc.strerror}: {exc.filename}"
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        # str(KeyError) is the repr of its key
        key = exc.args[0]
        return key if " " in key else f"no key {key!r}"
    expected = (ValueError, OSError, KeyError, EpisodeStoreError)
    if isinstance(exc, (*expected, HydraException, OmegaConfBaseException)):
        return _first_line(str(exc)) or type(exc).__name__
    message = _first_line(str(exc))
    detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return f"internal error ({detail}); rerun with --debug for the traceback"


def _debug_env() -> bool:
    return os.environ.get("ROBOTRL_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


SPIN_COUNT = "3000"  # GOMP_SPINCOUNT the CLI sets unless the user chose a wait policy


def _set_threads(cfg: DictConfig) -> None:
    """torch intra-op threads from the command's ``threads`` key (null: torch's default, one
    per core)."""
    threads = cfg.get("threads")
    if threads is not None:
        if int(threads) < 1:
            raise ValueError(f"threads must be >= 1 or null, got {threads}")
        import torch  # lazy: `robotrl --help` and config errors stay free of torch

        torch.set_num_threads(int(threads))


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``robotrl <command> [overrides]``: the command's JSON summary on stdout and its exit
    code (0 ok, 1 ran but found damage, 2 bad input, 130 interrupted); errors are one line on
    stderr unless ``--debug`` / ``ROBOTRL_DEBUG=1`` asks for the traceback."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    # OpenMP workers spin briefly, then sleep, while they wait for work: libgomp's default spin
    # lets two commands on shared cores burn each other's time (5-20x slower each), sleeping
    # at once halves BC's speed alone; bench/concurrency.py and docs/concurrency.md
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)
    args_in = list(sys.argv[1:] if argv is None else argv)
    # --debug is no override (those are key=value), so it is taken from anywhere
    debug = "--debug" in args_in or _debug_env()
    args_in = [a for a in args_in if a != "--debug"]
    found = _lookup(args_in)
    if found is not None and any(a in HELP_FLAGS for a in args_in[found[2] :]):
        label, (config_name, _, description), _ = found
        sys.stdout.write(config_help.format_help(label, config_name, description))
        return 0
    try:
        args = _parser().parse_args(args_in)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    found = _lookup(args_in)
    if found is None:  # argparse accepted it, so this cannot happen (no assert: -O drops it)
        return 2
    label, (config_name, runner, _), _ = found
    stage = "config"
    try:
        overrides = _with_positional(label, config_name, args.overrides)
        cfg = compose(config_name, overrides, command=label)
        missing = config_help.required_keys(cfg)
        if missing:
            pos = config_help.positional_key(config_name)
            how = f"robotrl {label} <{pos}> or " if pos in missing else ""
            raise config_help.ConfigKeyError(
                f"missing required key '{missing[0]}' (give {how}{missing[0]}=...)"
            )
        stage = "run"
        _set_threads(cfg)
        summary = runner(cfg)
        emit_summary(summary)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"robotrl {label}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        what = "bad configuration: " if stage == "config" else ""
        print(f"robotrl {label}: {what}{describe_error(exc)}", file=sys.stderr)
        return 2
    return int(summary.get("exit_code", 0))


if __name__ == "__main__":
    sys.exit(main())
