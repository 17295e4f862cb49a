"""Import of a LeRobotDataset v3.0 into the episode store (see :mod:`lerobot_format`).

Reads the parquet/MP4 files directly (no ``lerobot`` import). A dataset written by
:func:`~robotrl.datasets.lerobot_format.export_lerobot` carries a "robotrl" block in
``meta/info.json`` and comes back exactly; one written by lerobot is mapped as the
:mod:`~robotrl.datasets.lerobot_format` docstring describes.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from robotrl.datasets.episode_store import (
    FINAL_PREFIX,
    FORMAT,
    META_FIELDS,
    EpisodeStore,
)
from robotrl.datasets.lerobot_files import (
    DEFAULT_FEATURES,
    EPISODE_PREFIX,
    IMAGES,
    TASKS_PATH,
    LeRobotFormatError,
    column_to_numpy,
    decode_image,
    read_parquet,
    read_tasks,
    read_video,
)
from robotrl.datasets.store_layout import READABLE_SCHEMA_VERSIONS


@dataclass(frozen=True)
class _Column:
    """One store column read back from a LeRobot feature: ``feature[..., start:stop]``."""

    disk_name: str
    feature: str
    start: int | None
    stop: int | None
    shape: tuple[int, ...]
    dtype: np.dtype
    obs: bool


_MALFORMED = (KeyError, TypeError, ValueError, IndexError, AttributeError, pa.ArrowException)


def import_lerobot(
    lerobot_root: str | os.PathLike[str],
    store_path: str | os.PathLike[str],
    *,
    durable: bool = True,
) -> EpisodeStore:
    """Read the LeRobotDataset v3.0 at ``lerobot_root`` into a new episode store.

    Works on datasets written by :func:`export_lerobot` (restored exactly: every array, the
    per-episode metadata and store attributes) and by lerobot itself (mapped as described in
    the module docstring). ``store_path`` must not exist or be empty; if the import fails it
    is removed again. Returns the new store opened read-only.

    Raises :class:`LeRobotFormatError` for a missing, foreign or corrupt dataset.
    """
    root, out = Path(lerobot_root), Path(store_path)
    info = _read_info(root)
    try:
        episodes = _read_episodes(root, info)
        tasks = read_tasks(root / TASKS_PATH)
        columns, create_kw = _import_plan(info)
    except _MALFORMED as e:
        raise LeRobotFormatError(f"{root}: malformed LeRobot metadata: {e!r}") from e
    existed = out.exists()
    store = EpisodeStore.create(out, durable=durable, **create_kw)
    try:
        reader = _Reader(root, info)
        native = "robotrl" not in info
        for ep in episodes:
            rows = reader.rows(ep)
            data = {c.disk_name: reader.column(rows, ep, c) for c in columns}
            if native:
                meta, final = _native_meta(ep, rows, data, columns, tasks, info)
            else:
                meta, final = _robotrl_meta(ep, columns)
            # _commit, not EpisodeWriter: the writer measures duration/start time itself,
            # and the round trip must restore the recorded ones
            store._commit(data, final, meta)
    except BaseException as e:
        store.close()
        shutil.rmtree(out, ignore_errors=True)
        if existed:
            out.mkdir()
        if isinstance(e, _MALFORMED):
            raise LeRobotFormatError(f"{root}: malformed LeRobot data: {e!r}") from e
        raise
    store.close()
    return EpisodeStore.open(out, mode="r")


def _read_info(root: Path) -> dict[str, Any]:
    if not root.is_dir():
        raise LeRobotFormatError(f"{root}: no such directory")
    path = root / "meta" / "info.json"
    if not path.is_file():
        raise LeRobotFormatError(f"{root}: not a LeRobot dataset (no meta/info.json)")
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise LeRobotFormatError(f"{path} is unreadable or not JSON: {e}") from e
    if not isinstance(info, dict):
        raise LeRobotFormatError(f"{path}: expected a JSON object")
    version = info.get("codebase_version")
    if not (isinstance(version, str) and version.startswith("v3.")):
        raise LeRobotFormatError(
            f"{root}: codebase_version {version!r} is not supported (this reads v3.x); "
            "convert older datasets with lerobot.datasets.v30.convert_dataset_v21_to_v30"
        )
    fps, features = info.get("fps"), info.get("features")
    if not isinstance(fps, int | float) or not fps > 0 or not isinstance(features, dict):
        raise LeRobotFormatError(f"{path}: needs a positive 'fps' and a 'features' object")
    if "action" not in features:
        raise LeRobotFormatError(f"{root}: has no 'action' feature; features: {list(features)}")
    return info


def _read_episodes(root: Path, info: dict[str, Any]) -> list[dict[str, Any]]:
    paths = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    if not paths:
        raise LeRobotFormatError(f"{root}: no meta/episodes/*/*.parquet")
    episodes: list[dict[str, Any]] = []
    for path in paths:
        table = read_parquet(path)
        keep = [c for c in table.column_names if not c.startswith("stats/")]
        episodes += table.select(keep).to_pylist()
    episodes.sort(key=lambda e: e["episode_index"])
    if len(episodes) != info.get("total_episodes", len(episodes)):
        raise LeRobotFormatError(
            f"{root}: meta/episodes lists {len(episodes)} episodes, "
            f"info.json says {info.get('total_episodes')}"
        )
    return episodes


def _component(name: str) -> str:
    """A LeRobot name as one store key component (no '.' or '/')."""
    return name.replace(".", "_").replace("/", "_")


def _import_plan(info: dict[str, Any]) -> tuple[list[_Column], dict[str, Any]]:
    """Store columns to read and the ``EpisodeStore.create`` arguments."""
    block = info.get("robotrl")
    if block is not None:
        if (
            block.get("format") != FORMAT
            or block.get("schema_version") not in READABLE_SCHEMA_VERSIONS
        ):
            raise LeRobotFormatError("info.json robotrl block is not a schema this code reads")
        cols: list[_Column] = []
        for name, spec in block["keys"].items():
            feature, start, stop = block["columns"][name]
            cols.append(
                _Column(
                    name,
                    feature,
                    start,
                    stop,
                    tuple(spec["shape"]),
                    np.dtype(spec["dtype"]),
                    bool(spec.get("obs")),
                )
            )
        attrs = dict(block["store_attrs"])
        kw = {k: attrs.pop(k) for k in ("fps", "robot", "action_space", "created_by")}
        for k in ("format", "schema_version", "created_at"):
            attrs.pop(k, None)
        return cols, {**kw, "attrs": attrs}

    features = info["features"]
    cols = []
    for feat, spec in features.items():
        dtype, shape = spec["dtype"], tuple(spec["shape"])
        if feat in DEFAULT_FEATURES or feat in ("next.done", "next.success") or dtype == "string":
            continue
        if dtype in ("image", "video"):
            cam = feat.removeprefix(IMAGES) if feat.startswith(IMAGES) else feat.split(".")[-1]
            hwc = shape if shape[-1] == 3 else (*shape[1:], shape[0])  # (C, H, W) names too
            cols.append(
                _Column(
                    f"images.{_component(cam)}", feat, None, None, hwc, np.dtype(np.uint8), True
                )
            )
        elif feat in ("action", "next.reward", "complementary_info.is_intervention"):
            name = {"action": "action", "next.reward": "reward"}.get(feat, "intervention")
            step_dtype = {"action": np.float32, "reward": np.float32}.get(name, np.bool_)
            step_shape = shape if name == "action" else ()
            cols.append(_Column(name, feat, None, None, step_shape, np.dtype(step_dtype), False))
        elif feat.startswith("observation."):
            name = "state." + _component(feat.removeprefix("observation."))
            cols.append(_Column(name, feat, None, None, shape, np.dtype(dtype), True))
        else:
            name = "lerobot." + _component(feat)
            cols.append(_Column(name, feat, None, None, shape, np.dtype(dtype), True))
    names = {c.disk_name for c in cols}
    for name, dtype in (("reward", np.float32), ("intervention", np.bool_)):
        if name not in names:
            cols.append(_Column(name, "", None, None, (), np.dtype(dtype), False))
    cols.append(_Column("timestamp", "timestamp", None, None, (), np.dtype(np.float64), False))
    action = features["action"]
    return cols, {
        "fps": float(info["fps"]),
        "robot": info.get("robot_type") or "unknown",
        "action_space": {"shape": list(action["shape"]), "names": action.get("names")},
        "created_by": "robotrl.import_lerobot",
        "attrs": {"source": "lerobot", "lerobot_codebase_version": info["codebase_version"]},
    }


class _Reader:
    """Reads one episode's rows and frames, keeping the last data file and, per camera, the
    last decoded video file in memory (episodes are read in file order)."""

    def __init__(self, root: Path, info: dict[str, Any]) -> None:
        self.root, self.info = root, info
        self._file: tuple[Path, pa.Table, np.ndarray] | None = None  # path, table, episodes
        self._videos: dict[str, tuple[Path, np.ndarray]] = {}

    def rows(self, ep: dict[str, Any]) -> pa.Table:
        path = self.root / self.info["data_path"].format(
            chunk_index=ep["data/chunk_index"], file_index=ep["data/file_index"]
        )
        if self._file is None or self._file[0] != path:
            table = read_parquet(path)
            self._file = (path, table, table["episode_index"].to_numpy())
        _, table, episode_index = self._file
        rows = table.filter(pa.array(episode_index == ep["episode_index"]))
        rows = rows.take(np.argsort(rows["frame_index"].to_numpy(), kind="stable"))
        if rows.num_rows != ep["length"] or rows.num_rows == 0:
            raise LeRobotFormatError(
                f"{path}: episode {ep['episode_index']} has {rows.num_rows} rows, "
                f"meta/episodes says {ep['length']}"
            )
        return rows

    def column(self, rows: pa.Table, ep: dict[str, Any], col: _Column) -> np.ndarray:
        """(L, *col.shape) array of ``col.dtype``."""
        n = rows.num_rows
        if not col.feature:  # absent from a lerobot-written dataset: zeros
            return np.zeros((n, *col.shape), col.dtype)
        spec = self.info["features"].get(col.feature)
        if spec is None or (spec["dtype"] != "video" and col.feature not in rows.column_names):
            raise LeRobotFormatError(f"feature {col.feature!r} is missing from the data files")
        if spec["dtype"] == "video":
            out = self._video(col.feature, ep, rows["timestamp"].to_numpy())
        elif spec["dtype"] == "image":
            out = np.stack(
                [
                    decode_image(c)
                    for c in rows[col.feature].combine_chunks().field("bytes").to_pylist()
                ]
            )
        else:
            out = column_to_numpy(rows[col.feature], spec)
            if col.start is not None:
                out = out[:, col.start : col.stop]
        if out.shape[1:] != col.shape and out.size == n * math.prod(col.shape):
            out = out.reshape(n, *col.shape)
        if out.shape[1:] != col.shape:
            raise LeRobotFormatError(
                f"feature {col.feature!r}: rows of shape {out.shape[1:]}, expected {col.shape}"
            )
        return out.astype(col.dtype, copy=False)

    def _video(self, feat: str, ep: dict[str, Any], timestamps: np.ndarray) -> np.ndarray:
        path = self.root / self.info["video_path"].format(
            video_key=feat,
            chunk_index=ep[f"videos/{feat}/chunk_index"],
            file_index=ep[f"videos/{feat}/file_index"],
        )
        cached = self._videos.get(feat)
        if cached is None or cached[0] != path:
            cached = self._videos[feat] = (path, read_video(path))
        frames = cached[1]
        fps = self.info["features"][feat].get("info", {}).get("video.fps") or self.info["fps"]
        start = ep[f"videos/{feat}/from_timestamp"]
        idx = np.rint((start + timestamps.astype(np.float64)) * fps).astype(np.int64)
        if idx.min() < 0 or idx.max() >= len(frames):
            raise LeRobotFormatError(
                f"{path}: episode {ep['episode_index']} needs frames {idx.min()}..{idx.max()}, "
                f"the file has {len(frames)}"
            )
        return frames[idx]


def _robotrl_meta(
    ep: dict[str, Any], columns: list[_Column]
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    meta = {f: ep[EPISODE_PREFIX + f] for f in META_FIELDS}
    final = {
        c.disk_name: np.frombuffer(ep[EPISODE_PREFIX + FINAL_PREFIX + c.disk_name], c.dtype)
        .reshape(c.shape)
        .copy()
        for c in columns
        if c.obs
    }
    return meta, final


def _native_meta(
    ep: dict[str, Any],
    rows: pa.Table,
    data: dict[str, np.ndarray],
    columns: list[_Column],
    tasks: dict[int, str],
    info: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    def flag(name: str, reduce: str) -> bool:
        if name not in rows.column_names:
            return False
        values = rows[name].to_numpy(zero_copy_only=False).astype(bool)
        return bool(values.any() if reduce == "any" else values[-1])

    task_ids = list(dict.fromkeys(rows["task_index"].to_pylist()))
    names = [tasks[t] for t in task_ids]
    extra = {"lerobot_episode_index": ep["episode_index"]}
    if len(names) > 1:
        extra["lerobot_tasks"] = names
    meta = {
        "success": flag("next.success", "any"),
        "terminated": flag("next.done", "last"),
        "intervention_steps": int(data["intervention"].sum()),
        "duration_s": len(rows) / float(info["fps"]),
        "start_time": 0.0,
        "operator": "",
        "task": names[0],
        "language": names[0],
        "extra": json.dumps(extra),
        "final_obs_valid": False,
    }
    final = {c.disk_name: data[c.disk_name][-1] for c in columns if c.obs}
    return meta, final
