import json
import shutil

import numpy as np

from robotrl.cli import main
from robotrl.datasets import EpisodeStore


def _store(path, episodes=2):
    store = EpisodeStore.create(path, fps=20.0, robot="panda_sim")
    for e in range(episodes):
        with store.begin_episode(task="lift") as w:
            for t in range(3 + e):
                w.add({"state/x": np.full(2, t, np.float32)}, np.zeros(7, np.float32))
            w.commit(success=e == 0)
    store.close()


def _json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_info_summarises_the_store(tmp_path, capsys):
    _store(tmp_path / "d.zarr")
    assert main(["dataset", "info", f"path={tmp_path / 'd.zarr'}"]) == 0
    info = _json(capsys)
    assert (info["episodes"], info["steps"], info["success_rate"]) == (2, 7, 0.5)
    assert info["episode_length"] == {"min": 3, "mean": 3.5, "max": 4}
    assert info["keys"]["state/x"] == {"shape": [2], "dtype": "<f4"}
    assert info["tasks"] == ["lift"]


def test_verify_passes_then_fails_on_damage(tmp_path, capsys):
    path = tmp_path / "d.zarr"
    _store(path)
    assert main(["dataset", "verify", f"path={path}"]) == 0
    assert _json(capsys)["ok"]
    shutil.rmtree(path / "data" / "action")
    assert main(["dataset", "verify", f"path={path}"]) == 1
    report = _json(capsys)
    assert not report["ok"] and any("action" in e for e in report["errors"])


def test_foreign_or_missing_path_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["dataset", "info", f"path={tmp_path / 'empty'}"]) == 2
    err = capsys.readouterr().err
    assert "robotrl dataset" in err and "Traceback" not in err
    assert main(["dataset", "info"]) == 2  # path is required


def test_repair_reports_actions(tmp_path, capsys):
    _store(tmp_path / "d.zarr")
    assert main(["dataset", "repair", f"path={tmp_path / 'd.zarr'}"]) == 0
    out = _json(capsys)
    assert out["verify"]["ok"]


def test_import_rosbags_through_the_cli(tmp_path, capsys):
    import pytest

    pytest.importorskip("rosbags", reason="rosbags is in the 'ros2' extra")
    from rosbags.rosbag2 import StoragePlugin
    from test_rosbag_import import _write_bag

    from hardware.ros2.topics import FRANKA
    from robotrl.datasets.rosbag_import import bag_topics

    # bags of a franka_ros2 session (the default profile): the gripper on its own topic
    franka = bag_topics(FRANKA, cameras={"front": "/cam/front"})
    _write_bag(tmp_path / "b0", StoragePlugin.MCAP, topics=franka)
    _write_bag(tmp_path / "b1", StoragePlugin.SQLITE3, topics=franka)
    store = tmp_path / "s.zarr"
    args = [
        "dataset",
        "import",
        f"path={store}",
        "from=rosbag",
        f"inputs=[{tmp_path / 'b0'}]",
        "task=lift",
        "topics={cameras: {front: /cam/front}}",
    ]
    assert main(args) == 0
    assert _json(capsys)["imported_episodes"] == 1
    args[4] = f"inputs=[{tmp_path / 'b1'}]"
    assert main([*args, "success=true"]) == 0
    out = _json(capsys)
    assert (out["imported_episodes"], out["episodes"]) == (1, 2)
    with EpisodeStore.open(store) as s:
        np.testing.assert_allclose(s.episode(1)["state/gripper"][:, 0], 0.02)
    # the same bags read with another profile's topics: a clear error, nothing added
    assert main([*args[:5], "profile=generic", "topics={cameras: {front: /cam/front}}"]) == 2
    assert "lacks arm joints" in capsys.readouterr().err
    with EpisodeStore.open(store) as s:
        assert s.num_episodes == 2
    assert main(["dataset", "import", f"path={store}", "from=csv", "inputs=[x]"]) == 2
    assert "unknown import source" in capsys.readouterr().err


def test_export_then_import_lerobot_through_the_cli(tmp_path, capsys):
    src = tmp_path / "d.zarr"
    _store(src, episodes=3)
    assert main(["dataset", "export", f"path={src}", f"out={tmp_path / 'lr'}"]) == 0
    assert _json(capsys)["episodes"] == 3
    back = tmp_path / "back.zarr"
    assert (
        main(["dataset", "import", f"path={back}", "from=lerobot", f"inputs=[{tmp_path / 'lr'}]"])
        == 0
    )
    assert _json(capsys)["episodes"] == 3
    with EpisodeStore.open(src) as a, EpisodeStore.open(back) as b:
        for i in range(3):
            np.testing.assert_array_equal(a.episode(i)["state/x"], b.episode(i)["state/x"])
            np.testing.assert_array_equal(a.episode(i)["action"], b.episode(i)["action"])
    assert main(["dataset", "export", f"path={src}", "format=hdf5", "out=x"]) == 2
    assert (
        main(["dataset", "import", f"path={back}", "from=lerobot", f"inputs=[{tmp_path / 'lr'}]"])
        == 2
    )  # refuses to overwrite


def test_bias_writes_a_shifted_copy_and_needs_its_options(tmp_path, capsys):
    src, dst = tmp_path / "d.zarr", tmp_path / "b.zarr"
    _store(src)
    assert main(["dataset", "bias", f"path={src}", f"out={dst}", "bias=[0,0.1,0,0,0,0,0]"]) == 0
    out = _json(capsys)
    assert (out["episodes"], out["steps"], out["bias"][1]) == (2, 7, 0.1)
    with EpisodeStore.open(dst, mode="r") as store:
        np.testing.assert_allclose(store.array("action")[:, 1], 0.1)
        np.testing.assert_allclose(store.array("action")[:, 0], 0.0)
    assert main(["dataset", "bias", f"path={src}", f"out={tmp_path / 'c.zarr'}"]) == 2
    assert "give the action bias" in capsys.readouterr().err
