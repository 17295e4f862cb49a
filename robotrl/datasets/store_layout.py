"""On-disk layout of an :class:`~robotrl.datasets.episode_store.EpisodeStore`: names, chunking,
codecs, and the root attributes that say what a directory holds.

On-disk layout (one zarr v3 directory store)::

    <root>/zarr.json                  root group; attributes:
        format="robotrl.episode_store", schema_version, fps [Hz], robot, action_space,
        created_by, created_at, keys={disk_name: {key, shape, dtype}} (per-step schema),
        checksums={algorithm, items, complete_chunks} (what a checksum row covers),
        commit={num_episodes, num_steps, seq, time, chain}  <- the commit record (source of
        truth; chain: running hash of meta/checksums)
    <root>/data/<disk_name>           (T, ...) per-step arrays concatenated over episodes:
        state.<name>      float32 (T, D)        observation ``state/<name>``
        images.<camera>   uint8 (T, H, W, 3)    observation ``images/<camera>``, 1 frame/chunk
        action            float32 (T, Da)       executed action (the human's when intervening)
        intervention      bool (T,)             a human drove this step
        reward            float32 (T,)          0 when not given
        timestamp         float64 (T,)          [s] since the episode began
    <root>/meta/episode_ends          int64 (N,) cumulative step counts (exclusive end)
    <root>/meta/<field>               (N,) per episode: success bool, terminated bool,
        intervention_steps int64, duration_s float64 [s], start_time float64 [unix s],
        operator str, task str, language str, extra str (JSON)
    <root>/meta/final_obs.<disk_name> (N, ...) observation after the last action
    <root>/meta/checksums             uint64 (N, K) per episode, a hash of each array's rows
        (:mod:`robotrl.datasets.integrity`)

Observation keys ``a/b`` are stored as ``a.b`` so ``data`` stays flat: a reader that does
``root["data"][name][: root["meta"]["episode_ends"][-1]]`` (diffusion_policy's ReplayBuffer)
works unchanged. Key components must not contain ``.``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BloscCodec
from zarr.core.array_spec import ArrayConfigParams

FORMAT = "robotrl.episode_store"
SCHEMA_VERSION = 2  # 2: per-episode checksums (meta/checksums); 1 is still read
READABLE_SCHEMA_VERSIONS = (1, 2)
STATE_CHUNK_ROWS = 1024  # rows per chunk of non-image arrays (a 7-float row: 28 kB chunks)
META_CHUNK_ROWS = 4096
# Lossless zstd-3 for images: the measured choice is in robotrl/datasets/episode_store.py.
IMAGE_CODEC = BloscCodec(cname="zstd", clevel=3, shuffle="noshuffle")
ARRAY_CODEC = BloscCodec(cname="zstd", clevel=3, shuffle="shuffle")
WRITE_ALL_CHUNKS: ArrayConfigParams = {"write_empty_chunks": True}
CHUNK_KEYS = {"name": "default", "configuration": {"separator": "."}}  # flat dir per array

# Per-episode metadata fields: name -> numpy dtype (str fields are variable-length UTF-8).
META_FIELDS: dict[str, Any] = {
    "success": np.bool_,
    "terminated": np.bool_,
    "intervention_steps": np.int64,
    "duration_s": np.float64,
    "start_time": np.float64,
    "operator": str,
    "task": str,
    "language": str,
    "extra": str,
    "final_obs_valid": np.bool_,
}
FINAL_PREFIX = "final_obs."


class EpisodeStoreError(RuntimeError):
    """The directory is not a valid episode store, or an operation on it failed."""


def to_disk_name(key: str) -> str:
    """``state/ee_pos`` -> ``state.ee_pos`` (the flat array name under ``data/``)."""
    return key.replace("/", ".")


def to_key(disk_name: str) -> str:
    """``state.ee_pos`` -> ``state/ee_pos``."""
    return disk_name.replace(".", "/")


def read_root_attrs(root: Path) -> dict[str, Any]:
    """The root group's attributes of the store at ``root``, checked: a zarr v3 group with
    this format, a supported schema version and a commit record. Raises
    :class:`EpisodeStoreError` saying what was expected and what was found."""
    meta_path = root / "zarr.json"
    if root.is_file():
        raise EpisodeStoreError(f"{root} is a file, not an episode store (a directory)")
    if not root.is_dir():
        raise EpisodeStoreError(f"{root}: no such directory")
    try:
        doc = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise EpisodeStoreError(f"{root}: not a zarr v3 store (no zarr.json)") from None
    except (OSError, ValueError) as e:
        raise EpisodeStoreError(f"{meta_path} is unreadable or not JSON ({e})") from e
    attrs = doc.get("attributes", {}) if isinstance(doc, dict) else {}
    if doc.get("zarr_format") != 3 or doc.get("node_type") != "group":
        raise EpisodeStoreError(f"{root}: expected a zarr v3 group, got {doc.get('zarr_format')=}")
    if attrs.get("format") != FORMAT:
        raise EpisodeStoreError(
            f"{root}: not a robotrl episode store (attribute format={attrs.get('format')!r}, "
            f"expected {FORMAT!r})"
        )
    if attrs.get("schema_version") not in READABLE_SCHEMA_VERSIONS:
        raise EpisodeStoreError(
            f"{root}: schema_version {attrs.get('schema_version')!r} is not supported "
            f"(this code reads {', '.join(map(str, READABLE_SCHEMA_VERSIONS))})"
        )
    commit = attrs.get("commit")
    if not isinstance(commit, dict) or not {"num_episodes", "num_steps"} <= commit.keys():
        raise EpisodeStoreError(f"{root}: the commit record is missing or malformed: {commit!r}")
    return attrs


def read_rows(arr: zarr.Array, rows: slice = slice(None)) -> np.ndarray:
    """``arr[rows]``: zarr returns a numpy array for a slice (its type says any array-like)."""
    return np.asarray(arr[rows])


def create_array(
    group: zarr.Group,
    name: str,
    shape: tuple[int, ...],
    dtype: Any,
    chunk_rows: int,
    codec: BloscCodec | None,
) -> zarr.Array:
    """An empty (0, *shape) array ``name`` in ``group``, ``chunk_rows`` rows per chunk,
    compressed with ``codec`` (default :data:`ARRAY_CODEC`; str arrays are not compressed)."""
    # every chunk is written, even one of fill values, so a missing chunk file is damage
    kwargs: dict[str, Any] = {"chunk_key_encoding": CHUNK_KEYS, "config": WRITE_ALL_CHUNKS}
    if dtype is not str:
        kwargs["compressors"] = codec or ARRAY_CODEC
    return group.create_array(
        name, shape=(0, *shape), dtype=dtype, chunks=(chunk_rows, *shape), **kwargs
    )
