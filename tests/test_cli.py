"""The console script: overrides, errors, one JSON line on stdout."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import robotrl.conf
import sim
from robotrl import config_help
from robotrl.cli import BENCHMARKS, COMMANDS, DATASET_ACTIONS, compose, main
from robotrl.config_help import ConfigKeyError


@pytest.mark.parametrize(
    "name", [c for c, _, _ in COMMANDS.values()] + [b for b, _, _ in BENCHMARKS.values()]
)
def test_every_config_composes(name):
    cfg = compose(name, [])
    assert cfg is not None


@pytest.mark.parametrize("controller", ["native", "impedance", "osc"])
def test_controller_group_options_compose(controller):
    assert compose("experts", [f"controller={controller}"]).controller.name == controller


def test_bad_override_is_a_clear_error(capsys):
    assert main(["experts", "no_such_key=1"]) == 2
    assert "bad configuration" in capsys.readouterr().err
    assert main(["experts", "controller=pid"]) == 2


def test_unknown_task_is_a_clear_error(capsys, tmp_path):
    rc = main(["experts", "tasks=[stack]", "episodes=1", f"output_dir={tmp_path}"])
    assert rc == 2
    assert "unknown task" in capsys.readouterr().err


def test_console_script_prints_one_json_line(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "robotrl.cli",
            "experts",
            "tasks=[reach]",
            "episodes=2",
            "videos=0",
            f"output_dir={tmp_path}",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert summary["tasks"]["reach"]["episodes"] == 2


# --- strict overrides, --help from the YAML comments, positional paths, one-line errors ------


def _err_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def _yaml_comment(config: str, key: str) -> str:
    """The trailing comment of ``key:`` in robotrl/conf/<config>.yaml (what --help must show)."""
    text = (Path(robotrl.conf.__file__).parent / f"{config}.yaml").read_text()
    line = next(x for x in text.splitlines() if x.startswith(f"{key}:"))
    return line.split("#", 1)[1].strip()


@pytest.mark.parametrize("override", ["stepz=10", "+stepz=10", "++stepz=10", "~stepz"])
def test_unknown_key_is_an_error_that_names_the_closest_key(capsys, override):
    assert main(["train-bc", "dataset=x", override]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == ""
    assert lines[0].startswith("robotrl train-bc: ")
    assert "unknown config key 'stepz'; did you mean 'steps'?" in lines[0]
    assert "(robotrl train-bc --help lists every key)" in lines[0]


def test_nested_typo_suggests_the_nested_key(capsys):
    assert OmegaConf.select(compose("train_rl", ["checkpoint=x"]), "residual.actor_lr") is not None
    assert main(["train-rl", "checkpoint=x", "residual.actor_lrr=1"]) == 2
    (line,) = _err_lines(capsys)
    assert "unknown config key 'residual.actor_lrr'; did you mean 'residual.actor_lr'?" in line
    # the right name under the wrong parent: every key with that name is offered
    assert main(["train-rl", "checkpoint=x", "actor_lr=1"]) == 2
    (line,) = _err_lines(capsys)
    assert "'residual.actor_lr'" in line and "'flow_pg.actor_lr'" in line


def test_unknown_group_option_and_stray_word_are_one_line_errors(capsys):
    assert main(["experts", "controller=pid"]) == 2
    (line,) = _err_lines(capsys)
    assert "unknown controller 'pid'" in line and "impedance, native, osc" in line
    assert main(["experts", "episodes"]) == 2  # a bare word where only overrides are taken
    (line,) = _err_lines(capsys)
    assert "'episodes' is not an override; overrides are key=value" in line
    assert main(["dataset", "verfy"]) == 2  # argparse's usage errors too
    (line,) = _err_lines(capsys)
    assert "invalid choice: 'verfy'" in line


def test_free_form_keys_and_declared_keys_still_compose():
    cfg = compose("train_bc", ["dataset=x", "policy_kwargs={trunk_layers: 2}"])
    assert cfg.policy_kwargs == {"trunk_layers": 2}
    cfg = compose("train_bc", ["dataset=x", "+policy_kwargs.dim=96", "policy_kwargs.depth=1"])
    assert cfg.policy_kwargs == {"dim": 96, "depth": 1}
    cfg = compose("dataset", ["path=x", "topics={cameras: {front: /cam/front}}"])
    assert cfg.topics.cameras.front == "/cam/front"
    assert compose("collect", ["+device_kwargs.hold_time=0.2"]).device_kwargs.hold_time == 0.2
    cfg = compose("experts", ["controller=osc", "controller.stiffness=100", "image_size.0=64"])
    assert cfg.controller.name == "osc" and cfg.controller.stiffness == 100
    assert list(cfg.image_size) == [64, 320]
    assert "steps" not in compose("train_bc", ["dataset=x", "~steps"])
    with pytest.raises(ConfigKeyError, match=r"did you mean 'controller\.stiffness'"):
        compose("experts", ["controller.stifness=100"])
    with pytest.raises(ConfigKeyError, match=r"unknown config key 'steps\.foo'"):
        compose("train_bc", ["dataset=x", "+steps.foo=1"])  # below a scalar nothing is free


def test_help_lists_every_key_with_default_and_meaning(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # the width --help wraps to
    assert main(["train-bc", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: robotrl train-bc [DATASET] [key=value ...]")
    steps_doc = _yaml_comment("train_bc", "steps")
    assert re.search(rf"^  steps +3000 +{re.escape(steps_doc)}$", out, re.MULTILINE)
    te_doc = _yaml_comment("train_bc", "execute_horizon")
    assert re.search(rf"^  execute_horizon +8 +{re.escape(te_doc)}$", out, re.MULTILINE)
    assert re.search(r"^  dataset +\(required\) +episode store", out, re.MULTILINE)
    assert "behavior cloning of a chunked flow / diffusion policy" in out  # the YAML header
    # every key path of the composed config, group keys included, has its row
    cfg = compose("train_bc", ["dataset=x"])
    keys = [
        line.split()[0] for line in out.splitlines() if line.startswith("  ") and line[2] != " "
    ]
    for path in ("controller", "controller.name", "controller.stiffness", *cfg):
        assert path in keys
    # --help after overrides, and --debug anywhere, still show the help
    assert main(["--debug", "train-bc", "dataset=x", "-h"]) == 0
    assert capsys.readouterr().out == out


def test_dataset_and_bench_help(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["dataset", "verify", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: robotrl dataset verify [PATH] [key=value ...]")
    assert "check a store; exit 1 if damaged" in out
    assert re.search(r"^  path +\(required\) +the episode store$", out, re.MULTILINE)
    doc = _yaml_comment("dataset", "check_chunks")
    assert re.search(rf"^  check_chunks +true +{re.escape(doc)}$", out, re.MULTILINE)
    assert "  # export" in out  # section comments stay headings
    assert main(["bench", "sim", "--help"]) == 0
    out = capsys.readouterr().out
    doc = _yaml_comment("bench_sim", "rounds")
    assert re.search(rf"^  rounds +10 +{re.escape(doc)}$", out, re.MULTILINE)
    assert re.search(r"^  controller +native +config group: impedance \| native \| osc", out, re.M)


def _help_configs() -> dict[str, str]:
    """Config name -> a command label whose --help shows it (one per config: the dataset
    actions share dataset.yaml)."""
    out: dict[str, str] = {}
    tables = (("", COMMANDS), ("dataset ", DATASET_ACTIONS), ("bench ", BENCHMARKS))
    for prefix, table in tables:
        for label, (config_name, _, _) in table.items():
            out.setdefault(config_name, prefix + label)
    return out


@pytest.mark.parametrize("config_name", sorted(_help_configs()))
def test_every_config_key_has_a_meaning(config_name):
    rows = config_help._rows(config_name)  # the rows `robotrl <cmd> --help` prints
    listed = [r.key for r in rows]
    assert set(config_help.config_keys(config_name)) <= set(listed)  # every key has its row
    undocumented = [r.key for r in rows if not r.doc.strip()]
    assert not undocumented, (
        f"robotrl {_help_configs()[config_name]} --help: no meaning for {undocumented}; add a "
        f"trailing '# ...' comment to each in robotrl/conf/{config_name}.yaml"
    )
    groups = config_help.config_groups()
    for group in config_help.read_config_doc(config_name).defaults:
        if group not in groups:
            continue  # _self_
        (row,) = [r for r in rows if r.key == group]
        assert row.doc.startswith(f"config group: {' | '.join(groups[group])}")
        for option in groups[group]:  # the options not chosen by default are documented too
            doc = config_help.read_config_doc(f"{group}/{option}")
            assert doc.header, f"{group}/{option}.yaml has no header comment"
            missing = [k for k, kd in doc.keys.items() if not kd.doc.strip()]
            assert not missing, f"robotrl/conf/{group}/{option}.yaml: no meaning for {missing}"


def _capture_cfg(monkeypatch, table, name):
    seen = {}

    def runner(cfg):
        seen["cfg"] = cfg
        return {"command": name}

    monkeypatch.setitem(table, name, (table[name][0], runner, table[name][2]))
    return seen


def test_first_bare_argument_is_the_path(monkeypatch, capsys, tmp_path):
    seen = _capture_cfg(monkeypatch, DATASET_ACTIONS, "verify")
    store = tmp_path / "a b,[c].zarr"  # spaces, commas and brackets stay part of the path
    assert main(["dataset", "verify", str(store), "check_chunks=false"]) == 0
    assert seen["cfg"].path == str(store) and seen["cfg"].check_chunks is False
    assert json.loads(capsys.readouterr().out) == {"command": "verify"}
    assert main(["dataset", "verify", str(store), "other"]) == 2  # one path only
    assert len(_err_lines(capsys)) == 1
    assert main(["dataset", "verify", "x", "path=y"]) == 2
    (line,) = _err_lines(capsys)
    assert "path given twice" in line
    seen = _capture_cfg(monkeypatch, COMMANDS, "eval")
    assert main(["eval", "outputs/run/checkpoint", "episodes=3"]) == 0
    assert seen["cfg"].checkpoint == "outputs/run/checkpoint" and seen["cfg"].episodes == 3


def test_positional_path_that_does_not_exist_is_one_line(capsys, tmp_path):
    missing = tmp_path / "lift.zarr"
    assert main(["dataset", "info", str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith("robotrl dataset info: ") and str(missing) in captured.err
    assert main(["dataset", "info"]) == 2
    (line,) = _err_lines(capsys)
    assert "missing required key 'path'" in line and "robotrl dataset info <path>" in line


def _raising(exc):
    def runner(cfg):
        raise exc

    return runner


def test_unexpected_error_is_one_line_and_debug_reraises(monkeypatch, capsys):
    monkeypatch.delenv("ROBOTRL_DEBUG", raising=False)
    boom = RuntimeError("worker died\n  at step 3\n  in env 1")
    monkeypatch.setitem(COMMANDS, "eval", ("eval", _raising(boom), "eval"))
    assert main(["eval", "checkpoint=x"]) == 2
    (line,) = _err_lines(capsys)
    assert line.startswith("robotrl eval: internal error (RuntimeError: worker died")
    assert "2 more lines" in line and line.endswith("rerun with --debug for the traceback")
    for argv in (["--debug", "eval", "checkpoint=x"], ["eval", "checkpoint=x", "--debug"]):
        with pytest.raises(RuntimeError, match="worker died"):
            main(argv)
    monkeypatch.setenv("ROBOTRL_DEBUG", "1")
    with pytest.raises(RuntimeError, match="worker died"):
        main(["eval", "checkpoint=x"])


def test_expected_errors_and_interrupts(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("ROBOTRL_DEBUG", raising=False)
    missing = FileNotFoundError(2, "No such file or directory", str(tmp_path / "ckpt"))
    monkeypatch.setitem(COMMANDS, "eval", ("eval", _raising(missing), "eval"))
    assert main(["eval", "checkpoint=x"]) == 2
    (line,) = _err_lines(capsys)
    assert line == f"robotrl eval: No such file or directory: {tmp_path / 'ckpt'}"
    monkeypatch.setitem(COMMANDS, "eval", ("eval", _raising(KeyboardInterrupt()), "eval"))
    assert main(["eval", "checkpoint=x"]) == 130
    assert _err_lines(capsys) == ["robotrl eval: interrupted"]


def test_unknown_backend_is_one_line_with_the_backend_names(monkeypatch, capsys):
    def make_env(cfg):
        sim.make("lift", backend=cfg.backend)
        return {}

    monkeypatch.setitem(COMMANDS, "eval", ("eval", make_env, "eval"))
    assert main(["eval", "checkpoint=x", "backend=gazebo"]) == 2
    (line,) = _err_lines(capsys)
    assert line == (
        "robotrl eval: unknown backend 'gazebo'; available: "
        + str(sorted(["mujoco", *sim.registry.BACKENDS]))
    )


def test_threads_key_sets_torch_threads_and_rejects_zero(tmp_path, capsys, monkeypatch):
    import torch

    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    try:
        assert main(["eval", str(tmp_path / "nope"), "threads=0"]) == 2
        assert "threads must be >= 1" in capsys.readouterr().err
        assert os.environ["GOMP_SPINCOUNT"] == "3000"  # idle OpenMP workers sleep soon
        main(["eval", str(tmp_path / "nope"), "threads=1"])  # fails later: no checkpoint
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
