import json
import subprocess
import sys

import numpy as np
import pytest

from robotrl.cli import compose, main
from robotrl.commands.collect import run_collect
from robotrl.datasets import EpisodeStore


def test_collect_expert_into_a_new_store_then_append(tmp_path):
    out = tmp_path / "lift.zarr"
    base = ["task=reach", "device=expert", f"out={out}", "viewer=off"]
    s1 = run_collect(compose("collect", [*base, "episodes=3"]))
    assert (s1["recorded"], s1["successes"], s1["episodes_in_store"]) == (3, 3, 3)
    s2 = run_collect(compose("collect", [*base, "episodes=2", "seed=0"]))
    assert s2["episodes_in_store"] == 5
    with EpisodeStore.open(out) as store:  # appending continued the seeds: no duplicates
        assert not np.array_equal(
            store.episode(0)["state/goal_pos"], store.episode(3)["state/goal_pos"]
        )
    with pytest.raises(ValueError, match="images/front"):  # other keys never mix into a store
        run_collect(compose("collect", [*base, "episodes=1", "cameras=[front]"]))
    with EpisodeStore.open(out) as store:
        assert store.num_episodes == 5


@pytest.mark.slow
def test_collect_cli_prints_json(tmp_path):
    out = tmp_path / "r.zarr"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "robotrl.cli",
            "collect",
            "task=reach",
            "device=expert",
            "episodes=2",
            f"out={out}",
            "viewer=off",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["recorded"] == 2 and summary["out"] == str(out)


def test_collect_rejects_bad_viewer_and_device(tmp_path, capsys):
    assert main(["collect", "viewer=maybe", f"out={tmp_path / 'x.zarr'}"]) == 2
    assert main(["collect", "device=joystick9", f"out={tmp_path / 'x.zarr'}"]) == 2
    assert "available" in capsys.readouterr().err


def test_collect_into_a_file_is_one_line(tmp_path, capsys):
    target = tmp_path / "README.md"
    target.write_text("not a store")
    code = main(["collect", "task=reach", "device=expert", "episodes=1", f"out={target}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is a file; give a directory" in err[0], err
    assert target.read_text() == "not a store"
