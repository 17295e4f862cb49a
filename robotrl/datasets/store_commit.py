"""Appending one episode to an :class:`~robotrl.datasets.episode_store.EpisodeStore`: the
commit protocol.

Only the ``commit`` record in the root attributes says what exists. A commit appends rows to
every data/meta array (zarr writes each chunk and ``zarr.json`` to a temporary file and renames
it, so a chunk shared with committed rows is either the old or the new file, never torn),
fsyncs every written file and directory, then atomically replaces the root ``zarr.json`` with
the new record and fsyncs it (:mod:`robotrl.datasets.durable_store`). Rows beyond the record
are invisible; a failed commit truncates them at once, and opening for append (or
:func:`~robotrl.datasets.store_check.repair`) truncates what a killed process left.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import zarr
from zarr.core.sync import sync as zarr_sync

from robotrl.datasets.durable_store import write_root_attrs
from robotrl.datasets.integrity import CHECKSUMS, ChecksumItems, chain, episode_checksums
from robotrl.datasets.store_layout import (
    FINAL_PREFIX,
    IMAGE_CODEC,
    META_CHUNK_ROWS,
    META_FIELDS,
    STATE_CHUNK_ROWS,
    EpisodeStoreError,
    create_array,
    to_key,
)

if TYPE_CHECKING:
    from robotrl.datasets.episode_store import EpisodeStore


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
            from robotrl.datasets.store_check import truncate_to_commit

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


def _meta_dtype(field: str) -> Any:
    """The numpy dtype a metadata field is stored in (str fields as Python str)."""
    if field == "episode_ends":
        return np.int64
    dtype = META_FIELDS[field]
    return object if dtype is str else dtype
