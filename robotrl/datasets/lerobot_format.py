"""LeRobotDataset v3.0 import/export for the episode store, without importing ``lerobot``.

Written to the on-disk layout of ``lerobot`` 0.4 (``codebase_version`` "v3.0") and checked
against that package (``pytest -m lerobot``): a dataset exported here loads with
``LeRobotDataset(repo_id, root=out_dir)`` and one written by ``LeRobotDataset.create`` imports.

Exported layout::

    meta/info.json      codebase_version "v3.0", fps, robot_type, totals, chunks_size,
                        data_path / video_path templates, features {name: {dtype, shape,
                        names[, info]}}, and a "robotrl" block (store attrs + key mapping)
    meta/stats.json     per feature: min max mean std count q01 q10 q50 q90 q99
                        (images: per channel in [0, 1], shape (3, 1, 1))
    meta/tasks.parquet  task string (pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet   one row per episode: episode_index, tasks,
                        length, data/chunk_index, data/file_index, dataset_from_index,
                        dataset_to_index, videos/<key>/{chunk_index, file_index,
                        from_timestamp, to_timestamp}, stats/<feature>/<stat>,
                        meta/episodes/{chunk_index, file_index}, robotrl/<field>
    data/chunk-<NNN>/file-<NNN>.parquet            one row per step (rolls at 100 MB)
    videos/<key>/chunk-<NNN>/file-<NNN>.mp4         with video=True (rolls at 200 MB)

Key mapping (store -> LeRobot feature)::

    state/<n>  float32 (D,)    observation.state, concatenated in store key order;
                               names "<n>.<i>" say which part each dimension came from
    images/<c> uint8 (H,W,3)   observation.images.<c>: "image" (PNG in parquet) or "video"
    action                     action, names "action.<i>"
    reward                     next.reward
    intervention               complementary_info.is_intervention (lerobot's RL key prefix)
    timestamp  float64 [s]     robotrl.timestamp (LeRobot's own float32 ``timestamp`` is
                               frame_index / fps, which its video decoding relies on)
    other obs <a>/<b>          observation.<a>.<b>; other step columns robotrl.<name>
    episode success            next.success (True on the last step of a successful episode)
    episode end                next.done (True on every episode's last step)
    language or else task      the LeRobot task of every step of the episode
    per-episode metadata       robotrl/<field> episode columns; final_obs as raw bytes

Images default to ``image`` features: PNG is lossless, so a round trip and lerobot's loader
reproduce every pixel byte for byte, and the tests can demand equality. ``video=True`` writes
H.264 MP4 (yuv420p, a keyframe every 2 frames) like lerobot's recorder: ~10x smaller, lossy
(colour subsampling + quantisation), so frames match only within a tolerance.

Import reads the same files back (exactly, when the "robotrl" block is present). A dataset
lerobot wrote maps ``observation.state`` -> ``state/state``, ``observation.<x>`` ->
``state/<x>``, ``observation.images.<c>`` -> ``images/<c>``, ``next.reward`` -> reward,
``complementary_info.is_intervention`` -> intervention; other numeric features become
observations ``lerobot/<name>``; episode success is any ``next.success``, ``terminated`` the
last ``next.done``; the episode's first task is both ``task`` and ``language``.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robotrl.datasets.episode_store import (
    FINAL_PREFIX,
    FORMAT,
    META_FIELDS,
    SCHEMA_VERSION,
    EpisodeStore,
    to_key,
)
from robotrl.datasets.integrity import intact_episodes
from robotrl.datasets.lerobot_files import (
    CHUNKS_SIZE,
    CODEBASE_VERSION,
    DATA_FILE_MB,
    DATA_PATH,
    DEFAULT_FEATURES,
    EPISODE_PREFIX,
    EPISODES_PATH,
    IMAGES,
    STATE,
    STEP_FEATURES,
    TASKS_PATH,
    VIDEO_FILE_MB,
    VIDEO_PATH,
    LeRobotFormatError,
    RollingParquet,
    RollingVideo,
    data_schema,
    fsync_tree,
    image_cells,
    numeric_cells,
    video_info,
    write_json,
    write_tasks,
)
from robotrl.datasets.lerobot_import import import_lerobot
from robotrl.datasets.lerobot_stats import FeatureStats, stats_to_json

__all__ = ["LeRobotFormatError", "export_lerobot", "import_lerobot"]

VIDEO_CRF = 18  # x264 quality for video=True (lerobot records at 30; 18 is near-transparent)


@dataclass
class _Plan:
    """How store columns map to LeRobot features (recorded in info.json for the import)."""

    features: dict[str, dict[str, Any]] = field(default_factory=dict)
    # disk_name -> (feature, start, stop): the store column is feature[..., start:stop]
    columns: dict[str, tuple[str, int | None, int | None]] = field(default_factory=dict)


def _lerobot_dtype(dtype: np.dtype) -> str:
    if dtype.kind not in "biuf":
        raise LeRobotFormatError(f"dtype {dtype} has no LeRobot equivalent (numbers/bool only)")
    return dtype.name


def _export_plan(keys: dict[str, dict[str, Any]], video: bool) -> _Plan:
    plan = _Plan()
    state_names: list[str] = []
    for name, spec in keys.items():
        shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
        key = spec["key"]
        if key.startswith("state/") and dtype == np.float32 and len(shape) == 1:
            part = key.removeprefix("state/")
            start = len(state_names)
            state_names += [f"{part}.{i}" for i in range(shape[0])]
            plan.columns[name] = (STATE, start, len(state_names))
            continue
        if key.startswith("images/") and dtype == np.uint8 and len(shape) == 3 and shape[2] == 3:
            feat = IMAGES + name.removeprefix("images.")
            plan.features[feat] = {
                "dtype": "video" if video else "image",
                "shape": list(shape),
                "names": ["height", "width", "channels"],
            }
            plan.columns[name] = (feat, None, None)
            continue
        if len(shape) > 1:
            raise LeRobotFormatError(
                f"store key {key!r} has shape {shape}: only 1-D arrays and (H, W, 3) uint8 "
                "images map to LeRobot features"
            )
        feat = STEP_FEATURES.get(name) or ("observation." if spec.get("obs") else "robotrl.") + name
        names = [f"{name}.{i}" for i in range(shape[0])] if shape else None
        plan.features[feat] = {
            "dtype": _lerobot_dtype(dtype),
            "shape": list(shape) or [1],
            "names": names,
        }
        plan.columns[name] = (feat, None, None)
    if state_names:
        plan.features = {
            STATE: {"dtype": "float32", "shape": [len(state_names)], "names": state_names},
            **plan.features,
        }
    plan.features["next.done"] = {"dtype": "bool", "shape": [1], "names": None}
    plan.features["next.success"] = {"dtype": "bool", "shape": [1], "names": None}
    plan.features.update(DEFAULT_FEATURES)
    return plan


def export_lerobot(
    store_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    repo_id: str = "local/robotrl",
    *,
    video: bool = False,
    crf: int = VIDEO_CRF,
    data_file_mb: float = DATA_FILE_MB,
    video_file_mb: float = VIDEO_FILE_MB,
) -> Path:
    """Write the episode store at ``store_path`` as a LeRobotDataset v3.0 at ``out_dir``.

    Args:
        out_dir: must not exist or be empty. The dataset is written next to it and renamed
            into place at the end, so ``out_dir`` is either complete or absent.
        repo_id: recorded in info.json's "robotrl" block (what you would ``push_to_hub`` as);
            load the result with ``LeRobotDataset(repo_id, root=out_dir)``.
        video: store cameras as MP4 (H.264, lossy) instead of PNG images (lossless).
        crf: x264 constant rate factor for ``video`` (0-51, lower = better).
        data_file_mb / video_file_mb: start a new data / video file past this size.

    Returns the dataset root. Raises :class:`EpisodeStoreError` for an unreadable store and
    :class:`LeRobotFormatError` for data that has no LeRobot form.
    """
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise LeRobotFormatError(f"{out} already exists and is not an empty directory")
    with EpisodeStore.open(store_path, mode="r") as store:
        if store.num_episodes == 0:
            raise LeRobotFormatError(f"{store.path} has no episodes to export")
        intact_episodes(store)  # a damaged store is refused (DamagedStoreError), not exported
        fps = store.fps
        if video and not float(fps).is_integer():
            raise LeRobotFormatError(f"video export needs an integer fps, store has {fps}")
        plan = _export_plan(store.attrs["keys"], video)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            _write(store, plan, tmp, repo_id, crf, data_file_mb, video_file_mb)
            fsync_tree(tmp)
            if out.exists():
                out.rmdir()
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return out


def _episode_task(meta: dict[str, Any]) -> str:
    return str(meta["language"] or meta["task"])


def _write(
    store: EpisodeStore,
    plan: _Plan,
    root: Path,
    repo_id: str,
    crf: int,
    data_file_mb: float,
    video_file_mb: float,
) -> None:
    fps, feats = store.fps, plan.features
    for spec in feats.values():
        if spec["dtype"] == "video":
            spec["info"] = video_info(spec["shape"][0], spec["shape"][1], fps)
    stats = {k: FeatureStats(f) for k, f in feats.items() if f["dtype"] != "string"}
    data = RollingParquet(root, DATA_PATH, data_schema(feats), data_file_mb)
    videos = {
        k: RollingVideo(root, k, fps, crf, video_file_mb)
        for k, f in feats.items()
        if f["dtype"] == "video"
    }
    tasks: dict[str, int] = {}
    episodes: list[dict[str, Any]] = []
    for i in range(store.num_episodes):
        sl = store.episode_slice(i)
        length = sl.stop - sl.start
        meta = store.episode(i, keys=["action"])
        task = _episode_task(meta)
        task_index = tasks.setdefault(task, len(tasks))
        rows: dict[str, np.ndarray] = {}
        for name, (feat, start, _) in plan.columns.items():
            value = store.get(to_key(name), sl)
            if start is None:
                rows[feat] = value
            else:
                rows.setdefault(feat, np.empty((length, feats[feat]["shape"][0]), np.float32))
                rows[feat][:, start : start + value.shape[1]] = value
        last = np.arange(length) == length - 1
        rows["next.done"] = last
        rows["next.success"] = last & bool(meta["success"])
        rows["timestamp"] = (np.arange(length) / fps).astype(np.float32)
        rows["frame_index"] = np.arange(length, dtype=np.int64)
        rows["episode_index"] = np.full(length, i, np.int64)
        rows["index"] = np.arange(sl.start, sl.stop, dtype=np.int64)
        rows["task_index"] = np.full(length, task_index, np.int64)

        ep: dict[str, Any] = {"episode_index": i, "tasks": [task], "length": length}
        cols: dict[str, pa.Array] = {}
        for feat, spec in feats.items():
            if spec["dtype"] == "video":
                ep.update(videos[feat].write(rows[feat]))
            elif spec["dtype"] == "image":
                cols[feat] = image_cells(rows[feat])
            else:
                cols[feat] = numeric_cells(rows[feat])
        chunk, file = data.write(pa.table(cols))
        ep.update(
            {
                "data/chunk_index": chunk,
                "data/file_index": file,
                "dataset_from_index": sl.start,
                "dataset_to_index": sl.stop,
            }
        )
        for feat, acc in stats.items():
            for stat, value in acc.add(rows[feat]).items():
                ep[f"stats/{feat}/{stat}"] = np.asarray(value).tolist()
        ep["meta/episodes/chunk_index"] = 0
        ep["meta/episodes/file_index"] = 0
        for f in META_FIELDS:
            ep[EPISODE_PREFIX + f] = json.dumps(meta[f]) if f == "extra" else meta[f]
        for key, value in meta["final_obs"].items():
            ep[EPISODE_PREFIX + FINAL_PREFIX + key.replace("/", ".")] = value.tobytes()
        episodes.append(ep)
    data.close()
    for video in videos.values():
        video.close()

    write_tasks(root / TASKS_PATH, list(tasks))
    ep_path = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
    ep_path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(episodes), ep_path, compression="snappy")
    write_json(
        root / "meta" / "stats.json", {k: stats_to_json(s.result()) for k, s in stats.items()}
    )
    attrs = {k: v for k, v in store.attrs.items() if k not in ("keys", "commit")}
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": store.attrs.get("robot") or None,
        "total_episodes": store.num_episodes,
        "total_frames": store.num_steps,
        "total_tasks": len(tasks),
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": data_file_mb,
        "video_files_size_in_mb": video_file_mb,
        "fps": int(fps) if float(fps).is_integer() else fps,
        "splits": {"train": f"0:{store.num_episodes}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if videos else None,
        "features": feats,
        "robotrl": {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "repo_id": repo_id,
            "store_attrs": attrs,
            "keys": store.attrs["keys"],
            "columns": {k: list(v) for k, v in plan.columns.items()},
        },
    }
    write_json(root / "meta" / "info.json", info)
