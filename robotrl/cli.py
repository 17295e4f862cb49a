"""The ``robotrl`` console script: subcommands taking Hydra ``key=value`` overrides.

Every subcommand composes its config from ``robotrl/conf``, writes its outputs under
``outputs/<date>/<time>-<name>/`` where it produces files, shows progress on stderr and ends
with one JSON line on stdout. This is the only place configs are turned into objects.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from omegaconf import DictConfig

Command = Callable[[DictConfig], dict]


def _experts(cfg: DictConfig) -> dict:
    from robotrl.experts_command import run_experts

    return run_experts(cfg)


def _quickstart(cfg: DictConfig) -> dict:
    from robotrl.quickstart import run_quickstart

    return run_quickstart(cfg)


def _collect(cfg: DictConfig) -> dict:
    from robotrl.collect_command import run_collect

    return run_collect(cfg)


def _train_bc(cfg: DictConfig) -> dict:
    from robotrl.train_bc_command import run_train_bc

    return run_train_bc(cfg)


def _train_rl(cfg: DictConfig) -> dict:
    from robotrl.train_rl_command import run_train_rl

    return run_train_rl(cfg)


def _eval(cfg: DictConfig) -> dict:
    from robotrl.eval_command import run_eval

    return run_eval(cfg)


def _train_reward(cfg: DictConfig) -> dict:
    from robotrl.train_reward_command import run_train_reward

    return run_train_reward(cfg)


def _dataset(action: str) -> Command:
    def run(cfg: DictConfig) -> dict:
        from robotrl import dataset_command

        return getattr(dataset_command, f"dataset_{action}")(cfg)

    return run


def _distill(cfg: DictConfig) -> dict:
    from robotrl.distill_command import run_distill

    return run_distill(cfg)


def _bench_latency(cfg: DictConfig) -> dict:
    from robotrl.benchmarks.policy_latency import run_latency_benchmark

    return run_latency_benchmark(cfg)


def _bench_sim(cfg: DictConfig) -> dict:
    from robotrl.benchmarks.sim_throughput import run_sim_benchmark

    return run_sim_benchmark(cfg)


# subcommand -> (config name, runner, help)
COMMANDS: dict[str, tuple[str, Command, str]] = {
    "quickstart": (
        "quickstart",
        _quickstart,
        "end to end: biased demos -> BC -> eval -> residual RL with interventions -> report",
    ),
    "experts": ("experts", _experts, "every task's scripted expert, evaluated, with videos"),
    "collect": ("collect", _collect, "teleop / expert data collection into a zarr episode store"),
    "train-bc": ("train_bc", _train_bc, "behavior cloning of a flow / diffusion policy"),
    "eval": ("eval", _eval, "success rate of a checkpoint in sim, with videos"),
    "train-rl": ("train_rl", _train_rl, "RL on a BC checkpoint (algo=residual, human=...)"),
    "distill": ("distill", _distill, "one-step student of a flow / diffusion checkpoint"),
    "train-reward": ("train_reward", _train_reward, "success reward classifier from episodes"),
}
DATASET_ACTIONS: dict[str, tuple[str, Command, str]] = {
    "info": ("dataset", _dataset("info"), "what a store holds"),
    "verify": ("dataset", _dataset("verify"), "check a store; exit 1 if damaged"),
    "repair": ("dataset", _dataset("repair"), "remove what an interrupted commit left"),
    "import": ("dataset", _dataset("import"), "episodes from ROS 2 bags or a LeRobot dataset"),
    "export": ("dataset", _dataset("export"), "write a LeRobotDataset v3 (format=lerobot)"),
    "bias": (
        "dataset",
        _dataset("bias"),
        "a copy with a constant bias on every action (out=, bias=)",
    ),
}
BENCHMARKS: dict[str, tuple[str, Command, str]] = {
    "sim": ("bench_sim", _bench_sim, "env steps/s (1 and N envs) vs raw mj_step"),
    "latency": ("bench_latency", _bench_latency, "per-chunk CPU latency of policies (+ LeRobot)"),
}


def compose(config_name: str, overrides: Sequence[str]) -> DictConfig:
    """Compose ``robotrl/conf/<config_name>.yaml`` with ``key=value`` overrides."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="robotrl.conf", version_base=None):
        return hydra_compose(config_name=config_name, overrides=list(overrides))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="robotrl",
        description="Robot learning: BC pretraining, residual RL, flow policy gradients, "
        "impedance control and safety. Subcommands take Hydra key=value overrides.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for name, (_, _, help_) in COMMANDS.items():
        c = sub.add_parser(name, help=help_)
        c.add_argument("overrides", nargs="*", help="key=value config overrides")
    ds = sub.add_parser("dataset", help="inspect, verify and repair episode stores")
    ds.add_argument("action", choices=sorted(DATASET_ACTIONS))
    ds.add_argument("overrides", nargs="*", help="key=value config overrides (path=...)")
    bench = sub.add_parser("bench", help="benchmarks that print JSON")
    bench.add_argument("benchmark", choices=sorted(BENCHMARKS))
    bench.add_argument("overrides", nargs="*", help="key=value config overrides")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("MUJOCO_GL", "egl")
    args = _parser().parse_args(argv)
    if args.command == "bench":
        config_name, runner, _ = BENCHMARKS[args.benchmark]
    elif args.command == "dataset":
        config_name, runner, _ = DATASET_ACTIONS[args.action]
    else:
        config_name, runner, _ = COMMANDS[args.command]
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        cfg = compose(config_name, args.overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        print(f"robotrl {args.command}: bad configuration: {exc}", file=sys.stderr)
        return 2
    from robotrl.datasets import EpisodeStoreError
    from robotrl.run import emit_summary

    try:
        summary = runner(cfg)
    except (ValueError, FileNotFoundError, EpisodeStoreError, OmegaConfBaseException) as exc:
        print(f"robotrl {args.command}: {exc}", file=sys.stderr)
        return 2
    emit_summary(summary)
    return int(summary.get("exit_code", 0))


if __name__ == "__main__":
    sys.exit(main())
