"""File-level pieces of the LeRobotDataset v3.0 format, written and read without ``lerobot``.

What :mod:`robotrl.datasets.lerobot_format` builds on: the arrow types and schema metadata
that Hugging Face ``datasets`` (and so ``LeRobotDataset``) expects in the data parquet files,
``meta/tasks.parquet`` as pandas writes it, image cells (PNG bytes), MP4 video files (through
the ffmpeg binary shipped by ``imageio-ffmpeg``), rolling chunk/file indices and the
per-feature statistics of ``meta/stats.json``.

Shape letters: L frames, H, W image height and width.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import cv2
import imageio_ffmpeg
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robotrl.datasets.episode_store import EpisodeStoreError

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000  # files per chunk directory, as lerobot
DATA_FILE_MB = 100  # roll to a new data parquet past this size, as lerobot
VIDEO_FILE_MB = 200  # roll to a new mp4 past this size, as lerobot
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
TASKS_PATH = "meta/tasks.parquet"
DEFAULT_FEATURES = {  # lerobot adds these to every dataset, after the user's features
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
STEP_FEATURES = {  # store column -> LeRobot feature
    "action": "action",
    "reward": "next.reward",
    "intervention": "complementary_info.is_intervention",
    "timestamp": "robotrl.timestamp",
}
STATE, IMAGES = "observation.state", "observation.images."
EPISODE_PREFIX = "robotrl/"  # our per-episode columns in meta/episodes
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])  # datasets.Image()
PNG_LEVEL = 1  # zlib level: level 1 encodes ~5x faster than 6 for ~10 % more bytes
VIDEO_CODEC = "libx264"  # in imageio-ffmpeg's ffmpeg; lerobot decodes it with pyav/torchcodec
VIDEO_GOP = 2  # keyframe every 2 frames: random access for training, as lerobot's encoder


class LeRobotFormatError(EpisodeStoreError):
    """A LeRobot dataset is missing, malformed, or uses something this converter cannot map."""


# ------------------------------------------------------------------ arrow types
def arrow_type(feature: dict[str, Any]) -> pa.DataType:
    """Arrow type of a (non-video) LeRobot feature in the data parquet files."""
    dtype, shape = feature["dtype"], tuple(feature["shape"])
    if dtype == "image":
        return IMAGE_TYPE
    if dtype == "string":
        return pa.string()
    value = pa.from_numpy_dtype(np.dtype(dtype))
    if shape == (1,):
        return value
    if len(shape) == 1:
        return pa.list_(value, shape[0])
    raise LeRobotFormatError(f"feature with shape {shape} is not supported (1-D or images only)")


def hf_feature(feature: dict[str, Any]) -> dict[str, Any]:
    """The ``datasets.Features`` JSON of a LeRobot feature (schema metadata ``huggingface``)."""
    dtype, shape = feature["dtype"], tuple(feature["shape"])
    if dtype == "image":
        return {"_type": "Image"}
    value = {"dtype": dtype, "_type": "Value"}
    if shape == (1,):
        return value
    return {"feature": value, "length": shape[0], "_type": "List"}


def data_schema(features: dict[str, dict[str, Any]]) -> pa.Schema:
    """Schema of the data parquet files: every non-video feature, with the metadata that
    ``datasets`` writes so that readers without explicit features also get images back."""
    cols = {k: f for k, f in features.items() if f["dtype"] != "video"}
    meta = {"info": {"features": {k: hf_feature(f) for k, f in cols.items()}}}
    return pa.schema(
        [pa.field(k, arrow_type(f)) for k, f in cols.items()],
        metadata={b"huggingface": json.dumps(meta).encode()},
    )


def column_to_numpy(column: pa.ChunkedArray | pa.Array, feature: dict[str, Any]) -> np.ndarray:
    """(L, *shape) numpy rows of a numeric data column (scalars as (L,) for shape (1,))."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if arr.null_count:
        raise LeRobotFormatError(f"column of feature {feature} has {arr.null_count} null cells")
    shape = tuple(feature["shape"])
    if pa.types.is_fixed_size_list(arr.type) or pa.types.is_list(arr.type):
        flat = arr.flatten().to_numpy(zero_copy_only=False)
        if flat.size != len(arr) * int(np.prod(shape)):
            raise LeRobotFormatError(f"list column does not hold {shape} per row")
        return flat.reshape(len(arr), *shape)
    out = arr.to_numpy(zero_copy_only=False)
    return out if shape == (1,) else out.reshape(len(arr), *shape)


def numeric_cells(rows: np.ndarray) -> pa.Array:
    """(L,) -> arrow values; (L, D) -> ``fixed_size_list<D>`` cells (no per-row copies)."""
    if rows.ndim == 1:
        return pa.array(rows)
    flat = pa.array(np.ascontiguousarray(rows).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, rows.shape[1])


# ------------------------------------------------------------------ images
def encode_png(image: np.ndarray) -> bytes:
    """(H, W, 3) uint8 RGB -> PNG bytes (lossless)."""
    ok, buf = cv2.imencode(".png", image[..., ::-1], [cv2.IMWRITE_PNG_COMPRESSION, PNG_LEVEL])
    if not ok:
        raise LeRobotFormatError(f"PNG encoding failed for an image of shape {image.shape}")
    return buf.tobytes()


def decode_image(data: bytes | None) -> np.ndarray:
    """PNG/JPEG bytes -> (H, W, 3) uint8 RGB."""
    if not data:
        raise LeRobotFormatError("image cell has no embedded bytes (only a path is unsupported)")
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise LeRobotFormatError("image cell does not hold a decodable PNG/JPEG")
    return np.ascontiguousarray(img[..., ::-1])


def image_cells(frames: np.ndarray) -> pa.Array:
    """(L, H, W, 3) uint8 -> arrow ``struct<bytes, path>`` cells with embedded PNGs."""
    return pa.array([{"bytes": encode_png(f), "path": None} for f in frames], type=IMAGE_TYPE)


# ------------------------------------------------------------------ video
class VideoWriter:
    """Encodes RGB frames into one MP4 (H.264, yuv420p, constant ``fps``): frame k is shown at
    k / fps [s], which is how LeRobot addresses an episode inside a shared file
    (``from_timestamp`` + frame timestamp)."""

    def __init__(self, path: Path, width: int, height: int, fps: float, crf: int) -> None:
        if width % 2 or height % 2:
            raise LeRobotFormatError(f"yuv420p video needs even sizes, got {width}x{height}")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.frames = 0
        self._gen = imageio_ffmpeg.write_frames(
            str(path),
            (width, height),
            fps=fps,
            codec=VIDEO_CODEC,
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            quality=None,
            macro_block_size=1,
            ffmpeg_log_level="error",
            output_params=["-crf", str(crf), "-g", str(VIDEO_GOP), "-bf", "0"],
        )
        self._gen.send(None)

    def write(self, frames: np.ndarray) -> None:
        """Append (L, H, W, 3) uint8 RGB frames."""
        for f in frames:
            self._gen.send(np.ascontiguousarray(f))
        self.frames += len(frames)

    def close(self) -> None:
        self._gen.close()


class RollingVideo:
    """One camera's episodes -> ``videos/<key>/chunk-<NNN>/file-<NNN>.mp4`` files of at most
    ``max_mb`` each (one episode may exceed it alone).

    Each episode is encoded to its own temporary MP4 (so its size is exact: a file still being
    encoded lags on disk by the encoder's lookahead and I/O buffer), and a file's episodes are
    joined once, by stream copy, when the file is full or at :meth:`close`, as lerobot does.
    """

    def __init__(self, root: Path, key: str, fps: float, crf: int, max_mb: float) -> None:
        self.root, self.key, self.fps, self.crf = root, key, fps, crf
        self.max_bytes = max_mb * 2**20
        self.chunk, self.file = 0, 0
        self._tmp = root / ".partial_videos" / key
        self._parts: list[Path] = []
        self._bytes = 0
        self._frames = 0  # frames in the current file
        self._count = 0

    def write(self, frames: np.ndarray) -> dict[str, Any]:
        """Add an episode's (L, H, W, 3) uint8 frames; returns its ``videos/<key>/...``
        episode columns (chunk/file index, from/to timestamps [s] inside the file)."""
        part = self._tmp / f"{self._count:06d}.mp4"
        self._count += 1
        writer = VideoWriter(part, frames.shape[2], frames.shape[1], self.fps, self.crf)
        try:
            writer.write(frames)
        finally:
            writer.close()  # also ends the ffmpeg process on error
        size = part.stat().st_size
        if self._parts and self._bytes + size > self.max_bytes:
            self._join()
            self.chunk, self.file = next_file(self.chunk, self.file)
        self._parts.append(part)
        self._bytes += size
        start = self._frames / self.fps
        self._frames += len(frames)
        prefix = f"videos/{self.key}/"
        return {
            prefix + "chunk_index": self.chunk,
            prefix + "file_index": self.file,
            prefix + "from_timestamp": start,
            prefix + "to_timestamp": self._frames / self.fps,
        }

    def close(self) -> None:
        if self._parts:
            self._join()
        shutil.rmtree(self._tmp, ignore_errors=True)
        with contextlib.suppress(OSError):
            self._tmp.parent.rmdir()

    def _join(self) -> None:
        out = self.root / VIDEO_PATH.format(
            video_key=self.key, chunk_index=self.chunk, file_index=self.file
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        if len(self._parts) == 1:
            os.replace(self._parts[0], out)
        else:
            listing = self._tmp / "parts.txt"
            listing.write_text("".join(f"file '{p.resolve()}'\n" for p in self._parts))
            cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-f", "concat", "-safe", "0"]
            proc = subprocess.run(
                [*cmd, "-i", str(listing), "-c", "copy", str(out)], capture_output=True, text=True
            )
            if proc.returncode:
                raise LeRobotFormatError(f"joining episode videos failed: {proc.stderr.strip()}")
            for p in [*self._parts, listing]:
                p.unlink()
        self._parts, self._bytes, self._frames = [], 0, 0


def read_video(path: Path) -> np.ndarray:
    """All frames of a video file as (L, H, W, 3) uint8 RGB."""
    if not path.is_file():
        raise LeRobotFormatError(f"video file {path} is missing")
    try:
        reader = imageio_ffmpeg.read_frames(str(path), pix_fmt="rgb24")
        meta = next(reader)
        w, h = meta["size"]
        frames = [np.frombuffer(b, np.uint8).reshape(h, w, 3) for b in reader]
    except (OSError, RuntimeError, StopIteration) as e:
        raise LeRobotFormatError(f"cannot decode video {path}: {e}") from e
    return np.stack(frames) if frames else np.zeros((0, h, w, 3), np.uint8)


def video_info(height: int, width: int, fps: float) -> dict[str, Any]:
    """The ``info`` block of a video feature in ``meta/info.json`` (lerobot's keys)."""
    return {
        "video.height": height,
        "video.width": width,
        "video.codec": "h264",
        "video.pix_fmt": "yuv420p",
        "video.is_depth_map": False,
        "video.fps": int(fps),
        "video.channels": 3,
        "has_audio": False,
    }


# ------------------------------------------------------------------ files
def next_file(chunk: int, file: int) -> tuple[int, int]:
    """The (chunk_index, file_index) after this one: CHUNKS_SIZE files per chunk."""
    return (chunk + 1, 0) if file == CHUNKS_SIZE - 1 else (chunk, file + 1)


class RollingParquet:
    """Writes tables to ``root / template`` files, starting a new file when the current one
    would pass ``max_mb`` (by arrow in-memory size, as lerobot estimates)."""

    def __init__(self, root: Path, template: str, schema: pa.Schema, max_mb: float) -> None:
        self.root, self.template, self.schema = root, template, schema
        self.max_bytes = max_mb * 2**20
        self.chunk, self.file, self._bytes = 0, 0, 0
        self._writer: pq.ParquetWriter | None = None

    def write(self, table: pa.Table) -> tuple[int, int]:
        """Append ``table``; returns the (chunk_index, file_index) it went to."""
        if self._writer is not None and self._bytes + table.nbytes > self.max_bytes:
            self._writer.close()
            self._writer = None
            self.chunk, self.file = next_file(self.chunk, self.file)
            self._bytes = 0
        if self._writer is None:
            path = self.root / self.template.format(chunk_index=self.chunk, file_index=self.file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(path, self.schema, compression="snappy")
        self._writer.write_table(table.cast(self.schema))
        self._bytes += table.nbytes
        return self.chunk, self.file

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def write_tasks(path: Path, tasks: list[str]) -> None:
    """``meta/tasks.parquet``: a pandas frame indexed by task string with a ``task_index``
    column (what lerobot's ``load_tasks`` reads back with ``pd.read_parquet``)."""
    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": None,
                "field_name": "__index_level_0__",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.0",
    }
    table = pa.table(
        {
            "task_index": pa.array(range(len(tasks)), pa.int64()),
            "__index_level_0__": pa.array(tasks, pa.string()),
        }
    ).replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def read_tasks(path: Path) -> dict[int, str]:
    """``meta/tasks.parquet`` -> {task_index: task}, from pandas or plain layouts."""
    table = read_parquet(path)
    meta = json.loads((table.schema.metadata or {}).get(b"pandas", b"{}"))
    candidates = [*meta.get("index_columns", []), "task", "__index_level_0__"]
    name = next((c for c in candidates if isinstance(c, str) and c in table.column_names), None)
    if name is None or "task_index" not in table.column_names:
        raise LeRobotFormatError(f"{path}: expected a task column and task_index")
    return dict(zip(table["task_index"].to_pylist(), table[name].to_pylist(), strict=True))


def read_parquet(path: Path) -> pa.Table:
    """Read a parquet file, with a :class:`LeRobotFormatError` for missing/corrupt files."""
    if not path.is_file():
        raise LeRobotFormatError(f"{path} is missing")
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise LeRobotFormatError(f"{path} is not a readable parquet file: {e}") from e


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=4, ensure_ascii=False))


def fsync_tree(root: Path) -> None:
    """fsync every file and directory below ``root`` (before the final rename)."""
    for dirpath, _, files in os.walk(root):
        for name in [*files, "."]:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
