"""The console script: overrides, errors, one JSON line on stdout."""

import json
import subprocess
import sys

import pytest

from robotrl.cli import BENCHMARKS, COMMANDS, compose, main


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
