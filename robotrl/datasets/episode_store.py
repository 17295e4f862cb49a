"""Crash-safe zarr v3 episode store, diffusion_policy-compatible.

The on-disk layout (``data/<key>`` concatenated over episodes, ``meta/episode_ends``, the
commit record in the root attributes) is described in :mod:`robotrl.datasets.store_layout`;
recording an episode is :mod:`robotrl.datasets.episode_writer`; committing it, checking and
repairing a store are here.

Images are stored with blosc zstd-3: lossless (what is stored is exactly what the policy saw,
so episodes verify byte for byte), any zarr v3 reader opens them, and it decodes faster than
JPEG (the codec comparison is in docs/datasets.md).

Crash safety (the commit protocol, :func:`commit_episode`):

Only the ``commit`` record in the root attributes says what exists. A commit appends rows to
every data/meta array (zarr writes each chunk and ``zarr.json`` to a temporary file and renames
it, so a chunk shared with committed rows is either the old or the new file, never torn),
fsyncs every written file and directory, then atomically replaces the root ``zarr.json`` with
the new record and fsyncs it (:mod:`robotrl.datasets.durable_store`). Rows beyond the record
are invisible; a failed commit truncates them at once, and opening for append (or
:func:`repair`) truncates what a killed process left.
One writer at a time (``flock`` on the root directory, released by the kernel when the process
dies).

Check and repair (:func:`verify`, :func:`repair`):

:func:`verify` never modifies the store and never raises for a bad store: it returns a report
(``ok`` is False when committed data is damaged; ``clean`` is False when there is leftover
garbage from an interrupted commit, which :func:`repair` removes). The commit record in the
root attributes (N episodes, T steps) is the source of truth; rows beyond it are dangling.

Integrity: every commit records a checksum of each array's rows of the episode
(:mod:`robotrl.datasets.integrity`). Opening a store runs the quick structural check (missing
or empty chunk files, unreadable array metadata, the checksum chain) and refuses a damaged
store with :class:`~robotrl.datasets.integrity.DamagedStoreError`; readers that train on the
data also run the content check on the keys they read.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from tqdm.auto import tqdm
from zarr.core.sync import sync as zarr_sync

from robotrl.datasets.durable_store import DurableLocalStore, lock_writer, write_root_attrs
from robotrl.datasets.episode_writer import EpisodeWriter
from robotrl.datasets.integrity import (
    ALGORITHM,
    CHECKSUMS,
    ChecksumItems,
    Damage,
    DamagedStoreError,
    chain,
    chain_of,
    content_damage,
    episode_checksums,
    episode_digests,
    intact_episodes,
    merge_damage,
    structure_damage,
)
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
    read_rows,
    to_disk_name,
    to_key,
)

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
            self._data = _group(self._root, "data")
            self._meta = _group(self._root, "meta")
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
        return read_rows(self._meta_array("episode_ends"), slice(self.num_episodes))

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
            return read_rows(arr, slice(*index.indices(t)))
        idx = np.asarray(index)
        if idx.size and (idx.min() < -t or idx.max() >= t):
            raise IndexError(f"index out of range for {t} committed steps")
        return np.asarray(arr.get_orthogonal_selection(np.where(idx < 0, idx + t, idx)))

    def meta(self, field: str) -> np.ndarray:
        """(N, ...) per-episode metadata ``field`` (``success``, ``final_obs.<key>``, ...)."""
        return read_rows(self._meta_array(to_disk_name(field)), slice(self.num_episodes))

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
        meta = {field: read_rows(self._meta_array(field), slice(n)) for field in META_FIELDS}
        finals = {k: read_rows(arr, slice(n)) for k, arr in self._final_arrays().items()}
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
        """Append one episode; see :func:`commit_episode`."""
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


# ---- the commit protocol ------------------------------------------------------------


def commit_episode(
    store: EpisodeStore,
    columns: dict[str, np.ndarray],
    final_obs: dict[str, np.ndarray],
    meta: dict[str, Any],
) -> int:
    """Append one episode to ``store`` (open for appending) and publish it.

    Args:
        columns: disk_name -> (L, ...) rows, the same keys, shapes and dtypes in every episode.
        final_obs: disk_name -> (...) observation after the last action.
        meta: :data:`~robotrl.datasets.store_layout.META_FIELDS` values.

    Returns the episode index. On any failure (ENOSPC, Ctrl-C, ...) the partial rows are
    dropped, the committed episodes kept, and an :class:`EpisodeStoreError` raised (a
    ``BaseException`` such as KeyboardInterrupt propagates as it is).
    """
    schema = {
        name: {
            "key": to_key(name),
            "shape": list(rows.shape[1:]),
            "dtype": rows.dtype.str,
            "obs": name in final_obs,
        }
        for name, rows in columns.items()
    }
    if store._attrs["keys"] and schema != store._attrs["keys"]:
        raise EpisodeStoreError(
            f"episode keys/shapes/dtypes differ from the store's: got {schema}, "
            f"expected {store._attrs['keys']}"
        )
    n0, t0 = store.num_episodes, store.num_steps
    length = len(next(iter(columns.values())))
    sealed = "checksums" in store._attrs
    if sealed:
        items = ChecksumItems.from_attrs(store._attrs) or ChecksumItems()
        if not items.items:  # the first commit fixes what a checksum row covers
            items = ChecksumItems.for_schema(schema)
        stored_meta = {
            field: np.asarray(value, dtype=_meta_dtype(field))
            for field, value in (*meta.items(), ("episode_ends", t0 + length))
        }
        sums = episode_checksums(items, columns, final_obs, stored_meta)
    try:
        appends: list[tuple[zarr.Array, int, Any]] = []  # (array, first new row, rows)
        for name, rows in columns.items():
            arr = require_array(store, store._data, name, rows.shape[1:], rows.dtype, t0)
            appends.append((arr, t0, rows))
        for name, value in final_obs.items():
            final_name = FINAL_PREFIX + name
            arr = require_array(store, store._meta, final_name, value.shape, value.dtype, n0)
            appends.append((arr, n0, np.asarray(value)[None]))
        for field, value in (*meta.items(), ("episode_ends", t0 + length)):
            values = np.empty(1, dtype=_meta_dtype(field))
            values[0] = value
            appends.append((store._meta_array(field), n0, values))
        if sealed:
            arr = require_array(store, store._meta, CHECKSUMS, sums.shape, sums.dtype, n0)
            appends.append((arr, n0, sums[None]))
        append_rows(appends)
        if store.durable:
            store._zstore.sync()
        attrs = dict(store._attrs)
        attrs["keys"] = schema
        attrs["commit"] = {
            "num_episodes": n0 + 1,
            "num_steps": t0 + length,
            "seq": int(store._attrs["commit"].get("seq", 0)) + 1,
            "time": time.time(),
        }
        if sealed:
            attrs["checksums"] = {**store._attrs["checksums"], **items.to_attrs()}
            attrs["commit"]["chain"] = chain(store._attrs["commit"].get("chain", ""), sums)
        write_root_attrs(store.path, attrs)  # the commit point
        store._attrs = attrs
    except BaseException as e:  # ENOSPC, Ctrl-C, ...: drop the partial rows, keep the rest
        store._zstore.dirty.clear()
        try:
            truncate_to_commit(store)
        except BaseException:
            pass
        if isinstance(e, Exception):
            raise EpisodeStoreError(f"commit of episode {n0} failed: {e!r}") from e
        raise
    return n0


def append_rows(appends: list[tuple[zarr.Array, int, Any]]) -> None:
    """Grow each array to ``start + len(rows)`` rows and write ``rows`` there, all arrays at
    once on zarr's event loop (one round trip instead of two per array)."""

    async def grow_and_write(arr: zarr.Array, start: int, rows: Any) -> None:
        inner = arr._async_array  # zarr's public API writes one array per round trip
        await inner.resize((start + len(rows), *arr.shape[1:]))
        await inner.setitem(slice(start, start + len(rows)), rows)

    async def all_arrays() -> None:
        await asyncio.gather(*(grow_and_write(*a) for a in appends))

    zarr_sync(all_arrays())


def require_array(
    store: EpisodeStore,
    group: zarr.Group,
    name: str,
    shape: tuple[int, ...],
    dtype: np.dtype,
    rows: int,
) -> zarr.Array:
    """The array ``name`` of ``group`` (``store``'s data/ or meta/), created if absent (first
    episode); a leftover from an interrupted first commit with another shape is replaced.
    ``rows``: committed rows of the group (a mismatch with committed rows raises)."""
    cached = store._arrays.get(f"{group.path}/{name}")
    if cached is not None and cached.shape[1:] == tuple(shape) and cached.dtype == dtype:
        return cached  # known from an earlier commit: no metadata round trip
    if name in group:
        arr = store._array(group, name)
        if arr.shape[1:] == tuple(shape) and arr.dtype == dtype:
            return arr
        if rows:
            raise EpisodeStoreError(f"array {group.path}/{name} has an incompatible layout")
        del group[name]
    store._arrays.pop(f"{group.path}/{name}", None)
    image = name.startswith("images.") or (
        name.startswith(FINAL_PREFIX + "images.") and len(shape) == 3
    )
    chunk = 1 if image else STATE_CHUNK_ROWS if group is store._data else META_CHUNK_ROWS
    create_array(group, name, tuple(shape), dtype, chunk, IMAGE_CODEC if image else None)
    return store._array(group, name)


def _group(root: zarr.Group, name: str) -> zarr.Group:
    node = root[name]
    if not isinstance(node, zarr.Group):
        raise TypeError(f"{name}/ is an array, not a group")
    return node


def _meta_dtype(field: str) -> Any:
    """The numpy dtype a metadata field is stored in (str fields as Python str)."""
    if field == "episode_ends":
        return np.int64
    dtype = META_FIELDS[field]
    return object if dtype is str else dtype


# ---- check and repair ---------------------------------------------------------------


def verify(
    path: str | os.PathLike[str], *, check_chunks: bool = True, progress: bool = False
) -> dict[str, Any]:
    """Check a store: episode_ends monotonic and ending at T, every array as long as the commit
    record needs with the recorded shape/dtype, every chunk file present, the checksum chain
    intact, and (``check_chunks``) every committed chunk decoded and each episode's data
    compared with its checksum.

    Returns ``{"path", "ok", "clean", "num_episodes", "num_steps", "errors": [str],
    "warnings": [str], "damage": [{"file", "problem", "episodes"}], "damaged_episodes": int}``.
    ``progress`` shows a bar (bytes decoded) on stderr.
    """
    report: dict[str, Any] = {"path": str(path), "errors": [], "warnings": [], "damage": []}
    errors, warnings = report["errors"], report["warnings"]
    try:
        store = EpisodeStore.open(path, mode="r", check=False)
    except EpisodeStoreError as e:
        errors.append(str(e))
        return _finish(report, [])
    n, t = store.num_episodes, store.num_steps
    report.update(num_episodes=n, num_steps=t)
    damage: list[Damage] = []
    try:
        damage = structure_damage(store)
        if not any(d.file.endswith("zarr.json") for d in damage):  # else zarr cannot parse it
            _check_layout(store, errors, warnings)
        if check_chunks and not any(not d.episodes for d in damage):
            with tqdm(
                total=_committed_bytes(store),
                desc="verify",
                unit="B",
                unit_scale=True,
                disable=not progress,
                file=sys.stderr,
            ) as bar:
                damage = merge_damage(damage, content_damage(store, progress=bar.update))
        if "checksums" not in store.attrs:
            warnings.append(
                "written without checksums (schema_version 1): only decodability is checked; "
                f"`robotrl dataset repair {path}` adds checksums of the data as it reads now"
            )
        for f in _partial_files(Path(path)):
            warnings.append(f"leftover temporary file {f}")
    except Exception as e:  # a damaged store must give a report, not a traceback
        errors.append(f"unexpected error while checking: {e!r}")
    finally:
        store.close()
    return _finish(report, damage)


def repair(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Remove what an interrupted commit left behind (rows beyond the commit record, arrays not
    in the schema, temporary files) and add checksums to a store written before they existed.
    Committed episodes are never touched.

    Damaged committed data cannot be recovered from the store itself: then nothing is changed
    and the report lists every damaged file and episode under ``cannot_recover``. Returns
    ``{"path", "actions": [str], "cannot_recover": [str], "verify": report}``.
    """
    before = verify(path)
    if not before["ok"]:
        return {
            "path": str(path),
            "actions": [],
            "cannot_recover": before["errors"],
            "damaged_episodes": before["damaged_episodes"],
            "advice": (
                "the damaged episodes' data is lost from this store (restore those files from "
                "a backup, or train with exclude_damaged=true to use the intact episodes); "
                "nothing was changed"
            ),
            "verify": before,
        }
    with EpisodeStore.open(path, mode="a") as store:
        actions = list(store._repair_actions)
        if "checksums" not in store.attrs:
            actions.append(seal(store))
    return {"path": str(path), "actions": actions, "cannot_recover": [], "verify": verify(path)}


def seal(store: EpisodeStore) -> str:
    """Add checksums to a store written before they existed (schema_version 1), computed from
    the data as it reads now. Returns what was done."""
    items = ChecksumItems.for_schema(store.attrs["keys"])
    n = store.num_episodes
    sums = np.zeros((n, len(items.items)), np.uint64)
    ends = store.episode_ends.astype(np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    for j, (group, name) in enumerate(items.items):
        arr = store._array(store._data if group == "data" else store._meta, name)
        if group == "data":
            sums[:, j], bad = episode_digests(arr, store.num_steps, starts, ends)
        else:
            sums[:, j], bad = episode_digests(arr, n, np.arange(n), np.arange(1, n + 1))
        if bad:  # verify decoded everything before repair seals: only a race gets here
            raise EpisodeStoreError(f"{store.path}/{group}/{name} cannot be decoded; not sealed")

    if n:
        arr = require_array(store, store._meta, CHECKSUMS, sums.shape[1:], sums.dtype, 0)
        arr.resize(sums.shape)
        arr[:] = sums
    store._zstore.sync()
    attrs = dict(store.attrs)
    attrs["schema_version"] = SCHEMA_VERSION
    attrs["checksums"] = {**items.to_attrs(), "algorithm": ALGORITHM, "complete_chunks": False}
    attrs["commit"] = {**attrs["commit"], "chain": chain_of(sums)}
    write_root_attrs(store.path, attrs)
    store._attrs = attrs
    return f"added checksums of {n} episodes (as their data reads now)"


def repair_open_store(store: EpisodeStore) -> None:
    """Called by ``EpisodeStore.open(mode="a")``: repair, then refuse damaged stores."""
    report = verify(store.path, check_chunks=False)
    if not report["ok"]:
        errors = report["errors"]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise EpisodeStoreError(
            f"{store.path}: committed data is damaged, refusing to append: {errors[0]}{more}; "
            f"`robotrl dataset verify {store.path}` lists everything"
        )
    store._repair_actions = truncate_to_commit(store) if not report["clean"] else []


def truncate_to_commit(store: EpisodeStore) -> list[str]:
    """Shrink every array to the commit record, delete arrays outside the schema and
    temporary files. Returns what was done."""
    n, t = store.num_episodes, store.num_steps
    actions: list[str] = []
    for group_name, length in (("data", t), ("meta", n)):
        group = store._data if group_name == "data" else store._meta
        for name, arr in _arrays(store, group_name):
            in_schema = (
                name in store.attrs["keys"]
                if group_name == "data"
                else _in_meta_schema(store, name)
            )
            if not in_schema:
                del group[name]
                store._arrays.pop(f"{group.path}/{name}", None)
                actions.append(f"deleted {group_name}/{name} (not in the schema)")
            elif arr.shape[0] > length:
                actions.append(f"truncated {group_name}/{name} from {arr.shape[0]} to {length}")
                arr.resize((length, *arr.shape[1:]))
    for f in _partial_files(store.path):
        f.unlink(missing_ok=True)
        actions.append(f"removed {f}")
    store._zstore.sync()
    return actions


def _arrays(store: EpisodeStore, group_name: str) -> list[tuple[str, Any]]:
    group = store._data if group_name == "data" else store._meta
    return [(name, store._array(group, name)) for name in sorted(group.array_keys())]


def _check_layout(store: EpisodeStore, errors: list[str], warnings: list[str]) -> None:
    """Lengths, shapes and dtypes against the commit record and the schema."""
    n, t = store.num_episodes, store.num_steps
    ends = store._meta_array("episode_ends")
    if ends.shape[0] < n:
        errors.append(f"meta/episode_ends has {ends.shape[0]} entries, commit says {n}")
    else:
        e = read_rows(ends, slice(n))
        if n and (np.any(np.diff(e) <= 0) or e[0] <= 0):
            errors.append("meta/episode_ends is not strictly increasing from > 0")
        if (int(e[-1]) if n else 0) != t:
            errors.append(f"meta/episode_ends ends at {e[-1] if n else 0}, commit says {t}")
    for name, arr in _arrays(store, "meta"):
        if not _in_meta_schema(store, name):
            warnings.append(f"meta/{name} is not in the schema (dangling)")
            continue
        _check_length(f"meta/{name}", arr.shape[0], n, errors, warnings)
    present = dict(_arrays(store, "data"))
    for name, spec in store.attrs["keys"].items():
        arr = present.pop(name, None)
        if arr is None:
            errors.append(f"data/{name} is missing")
            continue
        if list(arr.shape[1:]) != spec["shape"] or arr.dtype != np.dtype(spec["dtype"]):
            errors.append(f"data/{name} has shape {arr.shape} {arr.dtype}, schema {spec}")
            continue
        _check_length(f"data/{name}", arr.shape[0], t, errors, warnings)
        if spec.get("obs") and f"{FINAL_PREFIX}{name}" not in store._meta:
            errors.append(f"meta/{FINAL_PREFIX}{name} is missing")
    warnings.extend(f"data/{name} is not in the schema (dangling)" for name in present)


def _in_meta_schema(store: EpisodeStore, name: str) -> bool:
    return (
        name in META_FIELDS
        or name == "episode_ends"
        or (name == CHECKSUMS and "checksums" in store.attrs)
        or (
            name.startswith(FINAL_PREFIX) and name.removeprefix(FINAL_PREFIX) in store.attrs["keys"]
        )
    )


def _committed_bytes(store: EpisodeStore) -> int:
    """Bytes of decoded committed data rows (what the content check reads)."""
    return sum(
        store.num_steps
        * int(np.prod(spec["shape"], dtype=np.int64))
        * np.dtype(spec["dtype"]).itemsize
        for spec in store.attrs["keys"].values()
    )


def _check_length(name: str, have: int, want: int, errors: list, warnings: list) -> None:
    if have < want:
        errors.append(f"{name} has {have} rows, the commit record needs {want}")
    elif have > want:
        warnings.append(f"{name} has {have - want} rows beyond the commit record (dangling)")


def _partial_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.partial"))


def _finish(report: dict[str, Any], damage: list[Damage]) -> dict[str, Any]:
    report["errors"].extend(str(d) for d in damage)
    report["damage"] = [
        {"file": d.file, "problem": d.problem, "episodes": list(d.episodes)} for d in damage
    ]
    whole = any(not d.episodes for d in damage)
    hit = {e for d in damage for e in d.episodes}
    report["damaged_episodes"] = report.get("num_episodes", 0) if whole else len(hit)
    report["ok"] = not report["errors"]
    report["clean"] = report["ok"] and not report["warnings"]
    return report


def open_intact(
    path: str | os.PathLike[str],
    keys: Iterable[str] | None = None,
    *,
    exclude_damaged: bool = False,
    who: str = "robotrl",
) -> tuple[EpisodeStore, np.ndarray]:
    """Open a store to train on: ``(store, (N,) bool intact mask)`` after both checks on
    ``keys``. A damaged store raises :class:`DamagedStoreError` unless ``exclude_damaged``;
    then how many episodes were left out is said on stderr (prefixed with ``who``)."""
    store = EpisodeStore.open(path, check=not exclude_damaged)
    try:
        mask = intact_episodes(store, keys, exclude_damaged=exclude_damaged)
    except BaseException:
        store.close()
        raise
    if not mask.all():
        print(
            f"{who}: left out {int((~mask).sum())} damaged episodes of {len(mask)} "
            "(exclude_damaged=true)",
            file=sys.stderr,
        )
    return store, mask


# ---------------------------------------------------------------------------- internals
