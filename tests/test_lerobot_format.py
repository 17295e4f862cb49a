"""LeRobotDataset v3.0 export/import.

Main-env tests check the round trip and the files against the format; ``-m lerobot`` tests
(run in the lerobot venv built by .ci/lerobot_env.sh) check both directions against the real
``lerobot`` package. Everything is built locally: no hub access (HF_HUB_OFFLINE=1 in conftest).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from robotrl.datasets import EpisodeStore, EpisodeStoreError
from robotrl.datasets.lerobot_format import LeRobotFormatError, export_lerobot, import_lerobot

FPS = 10
SIZE = 32
LENGTHS = (6, 9, 7)
VIDEO_MEAN_ERR = 4.0  # [0..255] mean abs error allowed for H.264 yuv420p frames at crf 18


def _frame(t: int, cam: int) -> np.ndarray:
    """Smooth (SIZE, SIZE, 3) uint8 frame with a moving square: compresses like a render."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    img = np.stack([xx * 6 + t * 3, yy * 5 + cam * 60, (xx + yy) * 3], -1)
    x0 = (2 * t + 8 * cam) % (SIZE - 8)
    img[8:16, x0 : x0 + 8] = (220, 30, 30)
    return np.clip(img, 0, 255).astype(np.uint8)


def _make_store(path: Path, *, noise_images: bool = True) -> EpisodeStore:
    """3 episodes: two float32 states, two 32x32 cameras, 7-D action, interventions,
    rewards, distinct tasks/languages/success flags; frames random (or smooth for video)."""
    rng = np.random.default_rng(0)
    store = EpisodeStore.create(
        path,
        fps=FPS,
        robot="panda",
        action_space={"shape": [7], "low": -1, "high": 1},
        attrs={"sim": "mujoco"},
        durable=False,
    )
    for e, length in enumerate(LENGTHS):
        meta = {"operator": f"op{e}", "task": "lift", "language": f"pick up cube {e % 2}"}
        with store.begin_episode(**meta, extra={"seed": e}) as w:
            for t in range(length):
                obs = {
                    "state/ee_pos": rng.standard_normal(3).astype(np.float32),
                    "state/joint_pos": rng.standard_normal(7).astype(np.float32),
                }
                for cam, name in enumerate(("front", "wrist")):
                    obs[f"images/{name}"] = (
                        rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
                        if noise_images
                        else _frame(t + 20 * e, cam)
                    )
                info = {"intervention": t in (2, 3) and e == 1}
                action = rng.uniform(-1, 1, 7).astype(np.float32)
                w.add(obs, action, info, reward=float(t == length - 1), timestamp=0.1 * t + 1e-3)
            final = {k: np.zeros_like(v) for k, v in obs.items()} if e == 0 else None
            w.commit(success=e != 1, terminated=e == 2, final_obs=final)
    return store


@pytest.fixture()
def src(tmp_path: Path) -> EpisodeStore:
    store = _make_store(tmp_path / "src.zarr")
    store.close()
    return EpisodeStore.open(tmp_path / "src.zarr")


def _assert_same_store(a: EpisodeStore, b: EpisodeStore, image_tol: float | None = None) -> None:
    assert b.attrs["keys"] == a.attrs["keys"]
    assert np.array_equal(b.episode_ends, a.episode_ends)
    for k in ("fps", "robot", "action_space", "sim"):
        assert b.attrs[k] == a.attrs[k], k
    for key in a.keys:
        x, y = a.get(key), b.get(key)
        assert y.dtype == x.dtype and y.shape == x.shape, key
        if image_tol is not None and key.startswith("images/"):
            assert np.abs(x.astype(np.int16) - y).mean() < image_tol, key
        else:
            assert x.tobytes() == y.tobytes(), key
    for i in range(a.num_episodes):
        ea, eb = a.episode(i, keys=["action"]), b.episode(i, keys=["action"])
        for field, value in ea.items():
            if field == "final_obs":
                assert eb[field].keys() == value.keys()
                for k, v in value.items():
                    assert v.dtype == eb[field][k].dtype and v.tobytes() == eb[field][k].tobytes()
            elif isinstance(value, np.ndarray):
                assert np.array_equal(value, eb[field])
            else:
                assert eb[field] == value, (i, field)


# --------------------------------------------------------------------------- main env
def test_round_trip_is_exact(src: EpisodeStore, tmp_path: Path) -> None:
    root = export_lerobot(src.path, tmp_path / "lr")
    back = import_lerobot(root, tmp_path / "back.zarr")
    _assert_same_store(src, back)
    assert back.mode == "r"


def test_exported_files_follow_v3_layout(src: EpisodeStore, tmp_path: Path) -> None:
    root = export_lerobot(src.path, tmp_path / "lr", repo_id="me/demo")
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert (info["fps"], info["total_episodes"], info["total_frames"]) == (FPS, 3, sum(LENGTHS))
    assert info["robotrl"]["repo_id"] == "me/demo"
    feats = info["features"]
    assert feats["observation.state"]["names"] == [
        *(f"ee_pos.{i}" for i in range(3)),
        *(f"joint_pos.{i}" for i in range(7)),
    ]
    assert feats["observation.images.front"] == {
        "dtype": "image",
        "shape": [SIZE, SIZE, 3],
        "names": ["height", "width", "channels"],
    }
    for name in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert feats[name]["shape"] == [1]

    tasks = pq.read_table(root / "meta/tasks.parquet")  # a pandas frame indexed by task
    pandas_meta = json.loads(tasks.schema.metadata[b"pandas"])
    assert tasks[pandas_meta["index_columns"][0]].to_pylist() == [
        "pick up cube 0",
        "pick up cube 1",
    ]
    assert tasks["task_index"].to_pylist() == [0, 1]

    eps = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    ends = np.cumsum(LENGTHS)
    for i, ep in enumerate(eps):
        assert ep["episode_index"] == i and ep["length"] == LENGTHS[i]
        assert (ep["dataset_from_index"], ep["dataset_to_index"]) == (ends[i] - LENGTHS[i], ends[i])
        assert ep["tasks"] == [f"pick up cube {i % 2}"]

    data = pq.read_table(root / "data/chunk-000/file-000.parquet")
    assert data.schema.field("observation.state").type.list_size == 10
    assert np.array_equal(data["index"].to_numpy(), np.arange(sum(LENGTHS)))
    state = np.stack(data["observation.state"].to_numpy(zero_copy_only=False))
    ref = np.concatenate([src.get("state/ee_pos"), src.get("state/joint_pos")], 1)
    assert np.array_equal(state, ref)
    done = data["next.done"].to_numpy(zero_copy_only=False)
    success = data["next.success"].to_numpy(zero_copy_only=False)
    assert np.flatnonzero(done).tolist() == (ends - 1).tolist()
    assert np.flatnonzero(success).tolist() == [ends[0] - 1, ends[2] - 1]
    intervention = data["complementary_info.is_intervention"].to_numpy(zero_copy_only=False)
    assert np.array_equal(intervention, src.get("intervention"))
    ts = data["timestamp"].to_numpy()
    assert np.allclose(ts, np.concatenate([np.arange(n) / FPS for n in LENGTHS]))

    stats = json.loads((root / "meta/stats.json").read_text())
    assert np.allclose(stats["observation.state"]["mean"], ref.mean(0))
    assert np.allclose(stats["observation.state"]["std"], ref.std(0))
    assert np.allclose(stats["action"]["q50"], np.quantile(src.get("action"), 0.5, axis=0))
    front = src.get("images/front")
    assert np.array(stats["observation.images.front"]["mean"]).shape == (3, 1, 1)
    assert np.allclose(
        np.ravel(stats["observation.images.front"]["mean"]), front.mean((0, 1, 2)) / 255
    )
    assert stats["observation.images.front"]["count"] == [sum(LENGTHS)]


def test_video_round_trip_within_tolerance(tmp_path: Path) -> None:
    src = _make_store(tmp_path / "src.zarr", noise_images=False)
    root = export_lerobot(src.path, tmp_path / "lr", video=True)
    assert sorted(p.name for p in (root / "videos").iterdir()) == [
        "observation.images.front",
        "observation.images.wrist",
    ]
    info = json.loads((root / "meta/info.json").read_text())
    assert info["features"]["observation.images.front"]["dtype"] == "video"
    assert info["features"]["observation.images.front"]["info"]["video.codec"] == "h264"
    eps = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [ep["videos/observation.images.front/from_timestamp"] for ep in eps] == pytest.approx(
        [0.0, LENGTHS[0] / FPS, (LENGTHS[0] + LENGTHS[1]) / FPS]
    )
    back = import_lerobot(root, tmp_path / "back.zarr")
    _assert_same_store(src, back, image_tol=VIDEO_MEAN_ERR)


@pytest.mark.slow
def test_rolling_data_and_video_files(tmp_path: Path) -> None:
    src = _make_store(tmp_path / "src.zarr", noise_images=False)
    root = export_lerobot(src.path, tmp_path / "lr", data_file_mb=1e-3, video_file_mb=1e-4)
    assert len(list((root / "data").glob("*/*.parquet"))) == 3  # one file per episode
    back = import_lerobot(root, tmp_path / "back.zarr")
    _assert_same_store(src, back)
    video = export_lerobot(src.path, tmp_path / "lv", video=True, video_file_mb=1e-4)
    assert len(list((video / "videos/observation.images.front").glob("*/*.mp4"))) == 3
    _assert_same_store(src, import_lerobot(video, tmp_path / "bv.zarr"), VIDEO_MEAN_ERR)


def test_import_without_robotrl_block_maps_lerobot_names(src: EpisodeStore, tmp_path: Path) -> None:
    root = export_lerobot(src.path, tmp_path / "lr")
    info_path = root / "meta/info.json"
    info = json.loads(info_path.read_text())
    del info["robotrl"]  # what a dataset written by lerobot looks like to the importer
    info_path.write_text(json.dumps(info))
    back = import_lerobot(root, tmp_path / "back.zarr")
    state = np.concatenate([src.get("state/ee_pos"), src.get("state/joint_pos")], 1)
    assert np.array_equal(back.get("state/state"), state)
    for key in ("images/front", "images/wrist", "action", "reward", "intervention"):
        assert np.array_equal(back.get(key), src.get(key)), key
    assert np.array_equal(back.episode_ends, src.episode_ends)
    assert back.meta("success").tolist() == [True, False, True]
    assert back.meta("language").tolist() == ["pick up cube 0", "pick up cube 1", "pick up cube 0"]
    assert back.attrs["source"] == "lerobot" and back.fps == FPS


def test_export_errors(src: EpisodeStore, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    with pytest.raises(LeRobotFormatError, match="not an empty directory"):
        export_lerobot(src.path, busy)
    with pytest.raises(EpisodeStoreError, match="not a zarr v3 store"):
        export_lerobot(busy, tmp_path / "out")
    empty = EpisodeStore.create(tmp_path / "empty.zarr", fps=FPS, robot="panda")
    empty.close()
    with pytest.raises(LeRobotFormatError, match="no episodes"):
        export_lerobot(empty.path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".out.partial-*"))


def _corrupt_cases(root: Path) -> dict[str, tuple[callable, str]]:
    info = root / "meta/info.json"

    def edit_info(**kw: object) -> None:
        doc = json.loads(info.read_text())
        doc.update(kw)
        info.write_text(json.dumps(doc))

    data = root / "data/chunk-000/file-000.parquet"
    return {
        "no info": (lambda: info.unlink(), "no meta/info.json"),
        "bad json": (lambda: info.write_text("{not json"), "not JSON"),
        "v2.1": (lambda: edit_info(codebase_version="v2.1"), "v2.1.*not supported"),
        "no action": (lambda: edit_info(features={}), "no 'action' feature"),
        "truncated data": (lambda: data.write_bytes(data.read_bytes()[:200]), "parquet"),
        "missing data": (lambda: data.unlink(), "missing"),
        "episode count": (lambda: edit_info(total_episodes=4), "lists 3 episodes"),
        "no episodes": (
            lambda: shutil.rmtree(root / "meta/episodes"),
            "no meta/episodes",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "no info",
        "bad json",
        "v2.1",
        "no action",
        "truncated data",
        "missing data",
        "episode count",
        "no episodes",
    ],
)
def test_corrupt_input_gives_clear_error(src: EpisodeStore, tmp_path: Path, case: str) -> None:
    root = export_lerobot(src.path, tmp_path / "lr")
    corrupt, message = _corrupt_cases(root)[case]
    corrupt()
    with pytest.raises(LeRobotFormatError, match=message):
        import_lerobot(root, tmp_path / "back.zarr")
    assert not (tmp_path / "back.zarr").exists()  # a failed import leaves nothing behind


def test_import_of_missing_dir_and_into_existing_store(src: EpisodeStore, tmp_path: Path) -> None:
    with pytest.raises(LeRobotFormatError, match="no such directory"):
        import_lerobot(tmp_path / "nope", tmp_path / "back.zarr")
    root = export_lerobot(src.path, tmp_path / "lr")
    with pytest.raises(EpisodeStoreError, match="already exists"):
        import_lerobot(root, src.path)


# --------------------------------------------------------------------------- real lerobot
@pytest.fixture()
def lerobot_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> type:
    """lerobot's LeRobotDataset class; Hugging Face datasets' cache goes to tmp_path."""
    pytest.importorskip("lerobot", reason="needs lerobot (run in the venv of .ci/lerobot_env.sh)")
    import datasets
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_datasets_cache")
    return LeRobotDataset


def _to_uint8_hwc(image: object) -> np.ndarray:
    """lerobot's (3, H, W) float32 [0, 1] image -> (H, W, 3) uint8."""
    return np.rint(image.permute(1, 2, 0).numpy() * 255).astype(np.uint8)  # type: ignore[attr-defined]


@pytest.mark.lerobot
@pytest.mark.parametrize("video", [False, True])
def test_lerobot_loads_our_export(tmp_path: Path, lerobot_dataset: type, video: bool) -> None:
    src = _make_store(tmp_path / "src.zarr", noise_images=not video)
    root = export_lerobot(src.path, tmp_path / "lr", repo_id="local/robotrl", video=video)
    # torchcodec needs system FFmpeg libraries; pyav ships its own
    ds = lerobot_dataset("local/robotrl", root=root, video_backend="pyav")
    assert (ds.num_episodes, ds.num_frames, ds.fps) == (3, sum(LENGTHS), FPS)
    state = np.concatenate([src.get("state/ee_pos"), src.get("state/joint_pos")], 1)
    ours = import_lerobot(root, tmp_path / "back.zarr") if video else src
    episode_of = np.repeat(np.arange(3), LENGTHS)
    for i in range(len(ds)):
        item = ds[i]
        assert np.array_equal(item["observation.state"].numpy(), state[i])
        assert np.array_equal(item["action"].numpy(), src.get("action", [i])[0])
        assert float(item["next.reward"]) == src.get("reward", [i])[0]
        assert bool(item["complementary_info.is_intervention"]) == src.get("intervention", [i])[0]
        assert int(item["episode_index"]) == episode_of[i]
        assert item["task"] == src.meta("language")[episode_of[i]]
        for cam in ("front", "wrist"):
            # image features: lossless; video: lerobot's decode == ours (same stream)
            frame = _to_uint8_hwc(item[f"observation.images.{cam}"])
            assert np.array_equal(frame, ours.get(f"images/{cam}", [i])[0]), (i, cam)
    if video:
        err = np.abs(ours.get("images/front").astype(np.int16) - src.get("images/front"))
        assert err.mean() < VIDEO_MEAN_ERR

    # training-style access: obs horizon 2, action horizon 16, padding at episode edges
    dt = {"observation.state": [-1 / FPS, 0.0], "action": [t / FPS for t in range(16)]}
    ds = lerobot_dataset("local/robotrl", root=root, delta_timestamps=dt, video_backend="pyav")
    item = ds[LENGTHS[0]]  # first step of episode 1
    assert item["action"].shape == (16, 7)
    assert item["action_is_pad"].tolist() == [False] * LENGTHS[1] + [True] * (16 - LENGTHS[1])
    assert item["observation.state_is_pad"].tolist() == [True, False]
    assert np.array_equal(item["action"][: LENGTHS[1]].numpy(), src.get("action")[6:15])


def _record_with_lerobot(lerobot_dataset: type, root: Path, video: bool) -> dict[str, np.ndarray]:
    """Write 3 episodes with lerobot's own recording API; returns what was recorded."""
    features = {
        "observation.state": {"dtype": "float32", "shape": (4,), "names": ["j0", "j1", "j2", "g"]},
        "observation.images.top": {
            "dtype": "video" if video else "image",
            "shape": (SIZE, SIZE, 3),
            "names": ["height", "width", "channels"],
        },
        "action": {"dtype": "float32", "shape": (4,), "names": ["j0", "j1", "j2", "g"]},
        "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
        "next.success": {"dtype": "bool", "shape": (1,), "names": None},
    }
    ds = lerobot_dataset.create(
        "local/native", fps=FPS, features=features, root=root, use_videos=video
    )
    rng = np.random.default_rng(1)
    rec: dict[str, list] = {"state": [], "image": [], "action": [], "reward": [], "task": []}
    for e, length in enumerate(LENGTHS):
        for t in range(length):
            frame = {
                "observation.state": rng.standard_normal(4).astype(np.float32),
                "observation.images.top": _frame(t + 20 * e, 0)
                if video
                else rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8),
                "action": rng.standard_normal(4).astype(np.float32),
                "next.reward": np.array([t / 10], np.float32),
                "next.success": np.array([e == 0 and t == length - 1]),
                "task": f"stack the blocks {e}",
            }
            ds.add_frame(dict(frame))
            rec["state"].append(frame["observation.state"])
            rec["image"].append(frame["observation.images.top"])
            rec["action"].append(frame["action"])
            rec["reward"].append(frame["next.reward"][0])
            rec["task"].append(frame["task"])
        ds.save_episode()
    ds.finalize()
    return {k: np.stack(v) for k, v in rec.items()}


@pytest.mark.lerobot
@pytest.mark.parametrize("video", [False, True])
def test_lerobot_written_dataset_imports(
    tmp_path: Path, lerobot_dataset: type, video: bool
) -> None:
    rec = _record_with_lerobot(lerobot_dataset, tmp_path / "native", video)
    store = import_lerobot(tmp_path / "native", tmp_path / "back.zarr")
    assert store.num_episodes == 3 and store.fps == FPS
    assert np.array_equal(store.episode_ends, np.cumsum(LENGTHS))
    assert np.array_equal(store.get("state/state"), rec["state"])
    assert np.array_equal(store.get("action"), rec["action"])
    assert np.array_equal(store.get("reward"), rec["reward"])
    lerobot_ts = np.concatenate([np.arange(n) / FPS for n in LENGTHS]).astype(np.float32)
    assert np.array_equal(store.get("timestamp"), lerobot_ts.astype(np.float64))
    assert store.meta("success").tolist() == [True, False, False]
    assert store.meta("language").tolist() == [f"stack the blocks {e}" for e in range(3)]
    images = store.get("images/top")
    if video:  # lerobot encodes AV1 (libsvtav1): lossy
        assert np.abs(images.astype(np.int16) - rec["image"]).mean() < 2 * VIDEO_MEAN_ERR
    else:
        assert np.array_equal(images, rec["image"])
    # and our export of it loads in lerobot again with the same frames
    again = export_lerobot(store.path, tmp_path / "again")
    ds = lerobot_dataset("local/again", root=again)
    for i in (0, LENGTHS[0], len(ds) - 1):
        assert np.array_equal(ds[i]["observation.state"].numpy(), rec["state"][i])
        assert np.array_equal(_to_uint8_hwc(ds[i]["observation.images.top"]), images[i])
