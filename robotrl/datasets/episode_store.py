"""Crash-safe zarr v3 episode store, diffusion_policy-compatible.

The on-disk layout (``data/<key>`` concatenated over episodes, ``meta/episode_ends``, the
commit record in the root attributes) is described in :mod:`robotrl.datasets.store_layout`;
recording is :mod:`robotrl.datasets.episode_writer`, checking and repair
:mod:`robotrl.datasets.store_check`.

Image codec (measured here on 200 MuJoCo-rendered 128x128 frames, front + wrist camera,
one frame per chunk, one core)::

    codec              bytes/frame  ratio  encode  decode   mean abs error
    blosc zstd-3            13 444    3.7   245 us   46 us   0 (lossless)
    blosc lz4-5             22 107    2.2    53 us   21 us   0 (lossless)
    JPEG q95 (opencv)        3 644   13.5    38 us   77 us   0.69 / 255
    JPEG q90 (opencv)        2 729   18.0    35 us   75 us   0.89 / 255
    PNG level 1             11 775    4.2   545 us  244 us   0 (lossless)

Chosen: blosc zstd-3. It is lossless (what is stored is exactly what the policy saw, so
episodes verify byte for byte), decodes faster than JPEG, and needs no custom codec: any zarr
v3 reader opens the images. JPEG would be 3.7x smaller; at 2 cameras x 20 Hz blosc costs
~1.1 MB/s of recording (4 GB per hour), which we accept.

Crash safety: only the ``commit`` record in the root attributes says what exists; the commit
protocol is :mod:`robotrl.datasets.store_commit`. One writer at a time (``flock`` on the root
directory, released by the kernel when the process dies).

Integrity: every commit records a checksum of each array's rows of the episode
(:mod:`robotrl.datasets.integrity`). Opening a store runs the quick structural check (missing
or empty chunk files, unreadable array metadata, the checksum chain) and refuses a damaged
store with :class:`~robotrl.datasets.integrity.DamagedStoreError`; readers that train on the
data also run the content check on the keys they read.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import zarr

from robotrl.datasets.durable_store import DurableLocalStore, lock_writer, write_root_attrs
from robotrl.datasets.integrity import ALGORITHM, DamagedStoreError, structure_damage
from robotrl.datasets.store_commit import commit_episode
from robotrl.datasets.store_layout import (
    ARRAY_CODEC,
    CHUNK_KEYS,
    FINAL_PREFIX,
    FORMAT,
    IMAGE_CODEC,
    META_CHUNK_ROWS,
    META_FIELDS,
    SCHEMA_VERSION,
    STATE_CHUNK_ROWS,
    WRITE_ALL_CHUNKS,
    EpisodeStoreError,
    create_array,
    read_root_attrs,
    to_disk_name,
    to_key,
)

if TYPE_CHECKING:
    from robotrl.datasets.episode_writer import EpisodeWriter

__all__ = [  # the layout names are re-exported: callers import them from here
    "ARRAY_CODEC",
    "CHUNK_KEYS",
    "FINAL_PREFIX",
    "FORMAT",
    "IMAGE_CODEC",
    "META_CHUNK_ROWS",
    "META_FIELDS",
    "SCHEMA_VERSION",
    "STATE_CHUNK_ROWS",
    "EpisodeStore",
    "EpisodeStoreError",
    "to_disk_name",
    "to_key",
]


class EpisodeStore:
    """Append-only store of episodes; use :meth:`create` or :meth:`open`, not the constructor.

    Shape letters: N episodes, T total steps, L steps of one episode.
    """

    def __init__(self, path: Path, mode: str, attrs: dict[str, Any], durable: bool) -> None:
        self.path = path
        self.mode = mode
        self.durable = durable
        self._attrs = attrs
        self._lock_fd: int | None = None
        self._zstore = DurableLocalStore(path, read_only=(mode == "r"))
        try:
            self._root = zarr.open_group(store=self._zstore, mode="r" if mode == "r" else "r+")
            self._data = self._root["data"]
            self._meta = self._root["meta"]
        except Exception as e:
            raise EpisodeStoreError(f"{path}: cannot open zarr groups data/ and meta/: {e}") from e
        self._arrays: dict[str, zarr.Array] = {}
        self._writer: EpisodeWriter | None = None
        self._repair_actions: list[str] = []  # what open(mode="a") fixed

    # ---------------------------------------------------------------- construction
    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        fps: float,
        robot: str,
        action_space: Mapping[str, Any] | None = None,
        created_by: str = "robotrl",
        attrs: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
        durable: bool = True,
    ) -> EpisodeStore:
        """Create an empty store at ``path`` and open it for appending.

        Args:
            fps: control/recording rate [Hz]. robot: robot name.
            action_space: description, e.g. ``{"shape": [7], "low": -1, "high": 1, "doc": ...}``.
            attrs: extra JSON-serialisable root attributes.
            exist_ok: if the store already exists, open it (mode "a") instead of raising.
            durable: fsync on every commit (turn off only for throwaway data).
        """
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise EpisodeStoreError(f"{root} is a file; give a directory for the new store")
        if root.exists() and any(root.iterdir()):
            if exist_ok:
                return cls.open(root, mode="a", durable=durable)
            raise EpisodeStoreError(f"{root} already exists and is not empty")
        if not fps > 0:
            raise EpisodeStoreError(f"fps must be > 0, got {fps}")
        root_attrs: dict[str, Any] = {
            **dict(attrs or {}),
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "fps": float(fps),
            "robot": str(robot),
            "action_space": dict(action_space or {}),
            "created_by": created_by,
            "created_at": datetime.now(UTC).isoformat(),
            "keys": {},
            "checksums": {"algorithm": ALGORITHM, "items": [], "complete_chunks": True},
            "commit": {
                "num_episodes": 0,
                "num_steps": 0,
                "seq": 0,
                "time": time.time(),
                "chain": "",
            },
        }
        zs = DurableLocalStore(root)
        group = zarr.create_group(store=zs, zarr_format=3)
        group.create_group("data")
        meta = group.create_group("meta")
        create_array(meta, "episode_ends", (), np.int64, META_CHUNK_ROWS, None)
        for name, dtype in META_FIELDS.items():
            create_array(meta, name, (), dtype, META_CHUNK_ROWS, None)
        zs.sync()
        # Written last: until this lands the directory is not a store (open raises).
        write_root_attrs(root, json.loads(json.dumps(root_attrs)))
        return cls.open(root, mode="a", durable=durable)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        mode: str = "r",
        *,
        durable: bool = True,
        check: bool = True,
    ) -> EpisodeStore:
        """Open an existing store. ``mode="r"`` reads; ``"a"`` appends (takes the writer lock
        and repairs rows left by an interrupted commit).

        ``check``: run the quick structural check and raise
        :class:`~robotrl.datasets.integrity.DamagedStoreError` (one line naming the damaged
        file) if it finds damage; ``False`` opens a damaged store for inspection (verify,
        repair, ``exclude_damaged``). Raises :class:`EpisodeStoreError` for anything that is
        not a readable store."""
        if mode not in ("r", "a"):
            raise EpisodeStoreError(f"mode must be 'r' or 'a', got {mode!r}")
        root = Path(path)
        attrs = read_root_attrs(root)
        lock_fd = lock_writer(root) if mode == "a" else None
        try:
            store = cls(root, mode, attrs, durable)
            store._lock_fd = lock_fd
            if check:
                damage = structure_damage(store)
                if damage:
                    raise DamagedStoreError(root, damage)
            if mode == "a":
                from robotrl.datasets.store_check import repair_open_store

                repair_open_store(store)
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        return store

    def close(self) -> None:
        """Release the writer lock (an open :class:`EpisodeWriter` is discarded)."""
        if self._writer is not None:
            self._writer.discard()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> EpisodeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- reading
    @property
    def attrs(self) -> dict[str, Any]:
        """Root attributes (fps, robot, action_space, keys, commit, ...)."""
        return self._attrs

    @property
    def fps(self) -> float:
        return float(self._attrs["fps"])

    @property
    def num_episodes(self) -> int:
        return int(self._attrs["commit"]["num_episodes"])

    @property
    def num_steps(self) -> int:
        return int(self._attrs["commit"]["num_steps"])

    @property
    def keys(self) -> list[str]:
        """Per-step data keys (``state/ee_pos``, ``images/front``, ``action``, ...)."""
        return [v["key"] for v in self._attrs["keys"].values()]

    @property
    def episode_ends(self) -> np.ndarray:
        """(N,) int64 cumulative exclusive episode ends."""
        return self._meta_array("episode_ends")[: self.num_episodes]

    @property
    def episode_lengths(self) -> np.ndarray:
        """(N,) int64 steps per episode."""
        return np.diff(self.episode_ends, prepend=0)

    def episode_slice(self, i: int) -> slice:
        """Rows of episode ``i`` (negative indices count from the end)."""
        n = self.num_episodes
        if not -n <= i < n:
            raise IndexError(f"episode {i} out of range for a store of {n} episodes")
        i %= n
        ends = self.episode_ends
        return slice(int(ends[i - 1]) if i > 0 else 0, int(ends[i]))

    def array(self, key: str) -> zarr.Array:
        """The zarr array of a data key (rows beyond :attr:`num_steps` are not committed)."""
        name = to_disk_name(key)
        if name not in self._attrs["keys"]:
            raise KeyError(f"no data key {key!r}; store has {self.keys}")
        return self._array(self._data, name)

    def get(self, key: str, index: slice | np.ndarray | int = slice(None)) -> np.ndarray:
        """Rows of data ``key`` among the committed :attr:`num_steps` rows."""
        arr = self.array(key)
        t = self.num_steps
        if isinstance(index, slice):
            return arr[slice(*index.indices(t))]
        idx = np.asarray(index)
        if idx.size and (idx.min() < -t or idx.max() >= t):
            raise IndexError(f"index out of range for {t} committed steps")
        return arr.get_orthogonal_selection(np.where(idx < 0, idx + t, idx))

    def meta(self, field: str) -> np.ndarray:
        """(N, ...) per-episode metadata ``field`` (``success``, ``final_obs.<key>``, ...)."""
        return self._meta_array(to_disk_name(field))[: self.num_episodes]

    def episode(self, i: int, keys: list[str] | None = None) -> dict[str, Any]:
        """Episode ``i``: ``{key: (L, ...) array}`` for data keys, plus metadata fields,
        ``final_obs`` (dict) and ``episode_index``."""
        sl = self.episode_slice(i)
        i %= self.num_episodes
        return self._episode_dict(
            i,
            {k: self.get(k, sl) for k in (keys or self.keys)},
            {field: self._meta_array(field)[i] for field in META_FIELDS},
            {k: arr[i] for k, arr in self._final_arrays().items()},
        )

    def _final_arrays(self) -> dict[str, zarr.Array]:
        """Data key -> its ``final_obs`` metadata array, for the observation keys."""
        return {
            v["key"]: self._meta_array(FINAL_PREFIX + n)
            for n, v in self._attrs["keys"].items()
            if v.get("obs")
        }

    @staticmethod
    def _episode_dict(
        i: int, data: dict[str, Any], meta: dict[str, Any], final_obs: dict[str, Any]
    ) -> dict[str, Any]:
        """What :meth:`episode` returns, from episode ``i``'s rows, metadata and final obs."""
        out: dict[str, Any] = dict(data)
        for field, value in meta.items():
            out[field] = np.asarray(value).item()
        out["extra"] = json.loads(out["extra"]) if out["extra"] else {}
        out["final_obs"] = final_obs
        out["episode_index"] = i
        return out

    def episodes(
        self, indices: Iterable[int] | None = None, keys: list[str] | None = None
    ) -> Iterator[dict[str, Any]]:
        """:meth:`episode` for each of ``indices`` (default all), reading each array once into
        memory instead of a few reads per episode: for walking many episodes."""
        n = self.num_episodes
        wanted = list(range(n)) if indices is None else [int(i) for i in indices]
        for i in wanted:
            if not -n <= i < n:
                raise IndexError(f"episode {i} out of range for a store of {n} episodes")
        wanted = [i % n for i in wanted]
        ends = self.episode_ends
        data = {k: self.get(k) for k in (keys or self.keys)}
        meta = {field: self._meta_array(field)[:n] for field in META_FIELDS}
        finals = {k: arr[:n] for k, arr in self._final_arrays().items()}
        for i in wanted:
            sl = slice(int(ends[i - 1]) if i > 0 else 0, int(ends[i]))
            yield self._episode_dict(
                i,
                {k: v[sl] for k, v in data.items()},
                {field: values[i] for field, values in meta.items()},
                {k: v[i] for k, v in finals.items()},
            )

    def __len__(self) -> int:
        return self.num_episodes

    def __repr__(self) -> str:
        return (
            f"EpisodeStore({str(self.path)!r}, mode={self.mode!r}, "
            f"episodes={self.num_episodes}, steps={self.num_steps})"
        )

    # ---------------------------------------------------------------- writing
    def begin_episode(
        self,
        *,
        operator: str = "",
        task: str = "",
        language: str = "",
        extra: Mapping[str, Any] | None = None,
    ) -> EpisodeWriter:
        """Start recording an episode; see :class:`EpisodeWriter`. One at a time."""
        if self.mode != "a":
            raise EpisodeStoreError("store is open read-only; open with mode='a' to record")
        if self._writer is not None:
            raise EpisodeStoreError("an episode is already being recorded; commit or discard it")
        from robotrl.datasets.episode_writer import EpisodeWriter

        self._writer = EpisodeWriter(
            self, operator=operator, task=task, language=language, extra=dict(extra or {})
        )
        return self._writer

    def _writer_done(self, writer: EpisodeWriter) -> None:
        if self._writer is writer:
            self._writer = None

    def _commit(
        self,
        columns: dict[str, np.ndarray],
        final_obs: dict[str, np.ndarray],
        meta: dict[str, Any],
    ) -> int:
        """Append one episode; see :func:`~robotrl.datasets.store_commit.commit_episode`."""
        return commit_episode(self, columns, final_obs, meta)

    # ---------------------------------------------------------------- internals
    def _array(self, group: zarr.Group, name: str) -> zarr.Array:
        cache_key = f"{group.path}/{name}"
        arr = self._arrays.get(cache_key)
        if arr is None:
            try:
                node = group[name]
            except KeyError:
                raise EpisodeStoreError(f"{self.path}: array {cache_key} is missing") from None
            except Exception as e:  # unreadable zarr.json: name the file, not the parser
                raise EpisodeStoreError(
                    f"{self.path}/{cache_key}/zarr.json is unreadable ({e})"
                ) from e
            if not isinstance(node, zarr.Array):
                raise EpisodeStoreError(f"{self.path}/{cache_key} is a group, not an array")
            arr = node.with_config(WRITE_ALL_CHUNKS)
            self._arrays[cache_key] = arr
        return arr

    def _meta_array(self, name: str) -> zarr.Array:
        return self._array(self._meta, name)
