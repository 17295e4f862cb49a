"""Content integrity of an episode store: what each committed episode's bytes hash to, the
chain that seals those hashes in the commit record, and the checks that find damage and name
the file it is in.

Every commit writes one row of ``meta/checksums`` (``(K,) uint64``): for each array of the
store (``data/<name>``: the episode's rows; ``meta/<name>``: the episode's entry) a 64-bit
BLAKE2b of its bytes, in the order of ``attrs["checksums"]["items"]``. The commit record holds
the running hash of all rows (``commit["chain"]``), so a damaged or substituted checksum row
is itself detected.

Two checks use them:

- :func:`structure_damage` (quick, run on every open): each array's ``zarr.json`` parses, every
  chunk file the committed rows need exists (arrays are written with
  ``write_empty_chunks``, so a missing chunk is damage, never fill values), and the checksum
  rows hash to the commit record's chain. It lists directories and reads ``meta/checksums``;
  it decodes no data.
- :func:`content_damage` (full, what ``robotrl dataset verify`` runs and what training runs on
  the keys it reads): decodes every committed chunk and compares each episode's hash.

Each finding is a :class:`Damage` naming the file (relative to the store root) and the
episodes it touches, so a caller can refuse the store with one line
(:class:`DamagedStoreError`) or drop exactly those episodes (:func:`intact_episodes`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from robotrl.datasets.store_layout import (
    FINAL_PREFIX,
    META_FIELDS,
    EpisodeStoreError,
    read_rows,
)

if TYPE_CHECKING:
    from robotrl.datasets.episode_store import EpisodeStore

ALGORITHM = "blake2b-64"
CHECKSUMS = "checksums"  # meta/checksums: (N, K) uint64, one row per committed episode
READ_BLOCK_BYTES = 64 << 20  # the content check decodes this much at a time


@dataclass(frozen=True)
class Damage:
    """One damaged file of a store.

    Attributes:
        file: path relative to the store root (``data/action/c.1.0``), or several chunks of
            one array (``data/images.front/c.120..c.319``) when the damage cannot be narrowed.
        problem: what is wrong (``is missing``, ``cannot be decoded: ...``,
            ``differs from its checksum``).
        episodes: the committed episodes whose data the file holds; empty when the damage
            makes the whole store untrustworthy (its metadata or the checksum chain).
    """

    file: str
    problem: str
    episodes: tuple[int, ...] = ()

    def __str__(self) -> str:
        if not self.episodes:
            return f"{self.file} {self.problem}"
        return f"{self.file} {self.problem} ({_span(self.episodes)})"


class DamagedStoreError(EpisodeStoreError):
    """The store's committed data is damaged; :attr:`damage` lists every finding."""

    def __init__(self, path: str | os.PathLike[str], damage: Sequence[Damage]) -> None:
        self.path = str(path)
        self.damage = list(damage)
        more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
        super().__init__(
            f"{path} is damaged: {damage[0]}{more}; `robotrl dataset verify {path}` lists "
            "everything, exclude_damaged=true uses only the intact episodes"
        )


@dataclass
class ChecksumItems:
    """The arrays a checksum row covers, in row order: ``(group, name)`` pairs."""

    items: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def for_schema(cls, keys: dict[str, Any]) -> ChecksumItems:
        """Every data array, every final-observation array and every metadata field."""
        items = [("data", name) for name in sorted(keys)]
        items += [("meta", FINAL_PREFIX + n) for n in sorted(keys) if keys[n].get("obs")]
        items += [("meta", name) for name in ("episode_ends", *META_FIELDS)]
        return cls(items)

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any]) -> ChecksumItems | None:
        spec = attrs.get("checksums")
        if not spec:
            return None
        return cls([tuple(s.split("/", 1)) for s in spec["items"]])  # type: ignore[misc]

    def to_attrs(self) -> dict[str, Any]:
        return {"algorithm": ALGORITHM, "items": [f"{g}/{n}" for g, n in self.items]}


def row_bytes(values: np.ndarray) -> bytes:
    """The bytes a checksum covers: the C-order buffer of numeric data; UTF-8 of strings."""
    values = np.asarray(values)
    if values.dtype.kind in "OUT":
        return "\x00".join(str(v) for v in values.ravel()).encode()
    return np.ascontiguousarray(values).tobytes()


def digest(data: bytes) -> int:
    """64-bit BLAKE2b of ``data`` as an unsigned int."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def chain(previous: str, row: np.ndarray) -> str:
    """The commit record's running hash after one more checksum row (hex)."""
    h = hashlib.blake2b(bytes.fromhex(previous), digest_size=16)
    h.update(np.ascontiguousarray(row, dtype=np.uint64).tobytes())
    return h.hexdigest()


def chain_of(rows: np.ndarray) -> str:
    """The running hash over ``rows`` (N, K), starting from the empty chain ``""``."""
    out = ""
    for row in rows:
        out = chain(out, row)
    return out


def episode_checksums(
    items: ChecksumItems,
    columns: dict[str, np.ndarray],
    final_obs: dict[str, np.ndarray],
    meta: dict[str, np.ndarray],
) -> np.ndarray:
    """(K,) uint64 checksum row of one episode from the values being committed.

    Args:
        columns: data disk name -> (L, ...) rows, in the dtype they are stored in.
        final_obs: disk name -> (...) final observation, stored dtype.
        meta: metadata field (and ``episode_ends``) -> 0-d value in its stored dtype.
    """
    out = np.empty(len(items.items), np.uint64)
    for j, (group, name) in enumerate(items.items):
        if group == "data":
            values = columns[name]
        elif name.startswith(FINAL_PREFIX):
            values = final_obs[name.removeprefix(FINAL_PREFIX)]
        else:
            values = meta[name]
        out[j] = digest(row_bytes(values))
    return out


# ---------------------------------------------------------------------------- the checks
def structure_damage(store: EpisodeStore) -> list[Damage]:
    """The quick check: metadata parses, every chunk file the committed rows need is present,
    and the checksum rows match the commit record. Decodes no data."""
    found: list[Damage] = []
    n = store.num_episodes
    ends = _episode_ends_or_none(store)
    complete = bool(store.attrs.get("checksums", {}).get("complete_chunks"))
    for group, name, rows in _store_arrays(store):
        rel = f"{group}/{name}"
        meta = _array_meta(store.path, rel, found)
        if meta is None:
            continue
        shape, chunk_rows, key_of = meta
        if shape[0] < rows:
            found.append(Damage(f"{rel}/zarr.json", f"has {shape[0]} rows, commit needs {rows}"))
            continue
        if not complete or rows == 0:
            continue  # chunks of all fill values were not written before checksums existed
        try:  # names only: a stat per chunk would cost more than the listing
            present = set(os.listdir(store.path / rel))
        except OSError as e:
            found.append(Damage(rel, f"cannot be listed: {e.strerror}"))
            continue
        for c in range(math.ceil(rows / chunk_rows)):
            if key_of(c) not in present:
                lo, hi = c * chunk_rows, min(rows, (c + 1) * chunk_rows)
                eps = _episodes_of_rows(group, name, lo, hi, ends, n)
                found.append(Damage(f"{rel}/{key_of(c)}", "is missing", eps))
    if "checksums" in store.attrs and not found:
        found += _chain_damage(store)
    return found


def content_damage(
    store: EpisodeStore,
    keys: Iterable[str] | None = None,
    *,
    progress: Callable[[int], None] | None = None,
) -> list[Damage]:
    """The full check: decode every committed chunk of the data ``keys`` (default: all) and of
    every metadata array, and compare each episode's hash with its checksum row.

    ``progress`` is called with the number of bytes decoded after each block. A store written
    before checksums existed is only checked for decodability.
    """
    items = ChecksumItems.from_attrs(store.attrs)
    n = store.num_episodes
    ends = store.episode_ends.astype(np.int64) if n else np.zeros(0, np.int64)
    sums = read_rows(store._meta_array(CHECKSUMS), slice(n)) if items is not None and n else None
    wanted = None if keys is None else {k.replace("/", ".") for k in keys}
    found: list[Damage] = []
    for group, name, rows in _store_arrays(store):
        if group == "data" and wanted is not None and name not in wanted:
            continue
        col = None
        if items is not None and (group, name) in items.items:
            col = items.items.index((group, name))
        arr = store._array(store._data if group == "data" else store._meta, name)
        starts = np.concatenate([[0], ends[:-1]]) if group == "data" else np.arange(n)
        stops = ends if group == "data" else np.arange(1, n + 1)
        expected = sums[:, col] if sums is not None and col is not None else None
        found += _check_array(
            store, f"{group}/{name}", arr, rows, starts, stops, expected, progress
        )
    return found


def merge_damage(structure: list[Damage], content: list[Damage]) -> list[Damage]:
    """Both checks' findings, a file named by the structural check not repeated (a missing
    chunk also fails its checksum)."""
    named = {d.file for d in structure}
    return structure + [d for d in content if d.file not in named]


def intact_episodes(
    store: EpisodeStore,
    keys: Iterable[str] | None = None,
    *,
    exclude_damaged: bool = False,
) -> np.ndarray:
    """(N,) bool: the episodes whose ``keys`` (default all), metadata and checksums are intact.

    Raises :class:`DamagedStoreError` if anything is damaged, unless ``exclude_damaged``; then
    damaged episodes are False. Damage that makes the whole store untrustworthy (metadata, the
    checksum chain) or that leaves no episode raises either way.
    """
    damage = structure_damage(store)
    if not any(not d.episodes for d in damage):
        damage = merge_damage(damage, content_damage(store, keys))
    mask = np.ones(store.num_episodes, bool)
    if not damage:
        return mask
    if not exclude_damaged or any(not d.episodes for d in damage):
        raise DamagedStoreError(store.path, damage)
    for d in damage:
        mask[list(d.episodes)] = False
    if not mask.any():
        raise DamagedStoreError(store.path, damage)
    return mask


def _store_arrays(store: EpisodeStore) -> list[tuple[str, str, int]]:
    """(group, name, committed rows) of every array the schema says exists."""
    n, t = store.num_episodes, store.num_steps
    keys = store.attrs["keys"]
    out = [("data", name, t) for name in sorted(keys)]
    out += [("meta", FINAL_PREFIX + k, n) for k in sorted(keys) if keys[k].get("obs")]
    out += [("meta", name, n) for name in ("episode_ends", *META_FIELDS)]
    if "checksums" in store.attrs and n:  # created with the first commit
        out.append(("meta", CHECKSUMS, n))
    return out


def _array_meta(
    root: Path, rel: str, found: list[Damage]
) -> tuple[list[int], int, Callable[[int], str]] | None:
    """(shape, rows per chunk, chunk index -> file name) from ``<rel>/zarr.json``."""
    path = root / rel / "zarr.json"
    try:
        doc = json.loads(path.read_text())
        shape = [int(s) for s in doc["shape"]]
        chunks = [int(c) for c in doc["chunk_grid"]["configuration"]["chunk_shape"]]
        enc = doc.get("chunk_key_encoding", {"name": "default"})
    except FileNotFoundError:
        found.append(Damage(f"{rel}/zarr.json", "is missing"))
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        found.append(Damage(f"{rel}/zarr.json", f"is unreadable ({_one_line(e)})"))
        return None
    sep = enc.get("configuration", {}).get("separator", "/" if enc["name"] == "default" else ".")
    rest = [sep.join("0" for _ in shape[1:])] if len(shape) > 1 else []
    prefix = ["c"] if enc["name"] == "default" else []

    def key_of(c: int) -> str:
        return sep.join([*prefix, str(c), *rest])

    return shape, chunks[0], key_of


def _episode_ends_or_none(store: EpisodeStore) -> np.ndarray | None:
    try:
        return store.episode_ends.astype(np.int64)
    except Exception:  # the structure check below names the file
        return None


def _episodes_of_rows(
    group: str, name: str, lo: int, hi: int, ends: np.ndarray | None, n: int
) -> tuple[int, ...]:
    """Episodes with data in rows [lo, hi) of ``group/name``; () if unknown (store-wide)."""
    if group == "meta":
        return () if name in (CHECKSUMS, "episode_ends") else tuple(range(lo, min(hi, n)))
    if ends is None:
        return ()
    starts = np.concatenate([[0], ends[:-1]])
    return tuple(int(i) for i in np.flatnonzero((starts < hi) & (ends > lo)))


def _chain_damage(store: EpisodeStore) -> list[Damage]:
    n = store.num_episodes
    expected = store.attrs["commit"].get("chain", "")
    try:
        rows = (
            read_rows(store._meta_array(CHECKSUMS), slice(n)) if n else np.zeros((0, 0), np.uint64)
        )
    except Exception as e:
        return [Damage(f"meta/{CHECKSUMS}", f"cannot be decoded ({_one_line(e)})")]
    if chain_of(rows) != expected:
        return [Damage(f"meta/{CHECKSUMS}", "does not match the commit record's checksum chain")]
    return []


def _check_array(
    store: EpisodeStore,
    rel: str,
    arr: Any,
    rows: int,
    starts: np.ndarray,
    stops: np.ndarray,
    expected: np.ndarray | None,
    progress: Callable[[int], None] | None,
) -> list[Damage]:
    """Decode rows [0, rows) of ``arr`` block by block, hashing each episode's rows
    [starts[i], stops[i]) and comparing with ``expected[i]``."""
    chunk_rows = int(arr.chunks[0])
    meta = _array_meta(store.path, rel, [])
    key_of = meta[2] if meta else (lambda c: f"c{c}")
    digests, bad_chunks = episode_digests(arr, rows, starts, stops, progress=progress)
    mismatched = [] if expected is None else np.flatnonzero(digests != expected).tolist()
    found = []
    for c, problem in sorted(bad_chunks.items()):
        lo, hi = c * chunk_rows, min(rows, (c + 1) * chunk_rows)
        eps = np.flatnonzero((starts < hi) & (stops > lo))
        found.append(Damage(f"{rel}/{key_of(c)}", f"cannot be decoded ({problem})", _ints(eps)))
    decoded_bad = {e for d in found for e in d.episodes}
    mismatched = [i for i in mismatched if i not in decoded_bad]
    found += _attribute_mismatches(rel, key_of, chunk_rows, starts, stops, mismatched)
    if rel.endswith(("/episode_ends", f"/{CHECKSUMS}")):
        found = [Damage(d.file, d.problem) for d in found]  # every episode depends on them
    return found


def episode_digests(
    arr: Any,
    rows: int,
    starts: np.ndarray,
    stops: np.ndarray,
    *,
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, dict[int, str]]:
    """Hash rows [starts[i], stops[i]) of ``arr`` for every i, decoding rows [0, rows) block by
    block (never the whole array at once). Returns the (N,) uint64 digests (as
    :func:`digest` of :func:`row_bytes`) and ``{chunk index: why it cannot be decoded}`` (the
    rows of such a chunk hash as zeros). ``progress`` gets the bytes decoded per block."""
    chunk_rows = int(arr.chunks[0])
    row_nbytes = max(1, int(np.prod(arr.shape[1:], dtype=np.int64)) * arr.dtype.itemsize)
    block = max(1, READ_BLOCK_BYTES // (row_nbytes * chunk_rows)) * chunk_rows
    digests = np.zeros(len(starts), np.uint64)
    bad_chunks: dict[int, str] = {}
    hashers: dict[int, Any] = {}
    ep = 0  # first episode not yet finished; episodes are contiguous and in order
    for b0 in range(0, rows, block):
        b1 = min(rows, b0 + block)
        values, failed = _decode_block(arr, b0, b1, chunk_rows)
        bad_chunks.update(failed)
        if progress is not None:
            progress((b1 - b0) * row_nbytes)
        i = ep
        while i < len(starts) and starts[i] < b1:
            lo, hi = max(int(starts[i]), b0), min(int(stops[i]), b1)
            h = hashers.setdefault(i, hashlib.blake2b(digest_size=8))
            if hi > lo:
                h.update(row_bytes(values[lo - b0 : hi - b0]))
            if stops[i] <= b1:
                digests[i] = int.from_bytes(hashers.pop(i).digest(), "little")
                ep = i + 1
            i += 1
    return digests, bad_chunks


def _decode_block(arr: Any, b0: int, b1: int, chunk_rows: int) -> tuple[np.ndarray, dict[int, str]]:
    """Rows [b0, b1); a block that fails is read chunk by chunk to find the bad chunks
    (whose rows are left as zeros and reported)."""
    try:
        return np.asarray(arr[b0:b1]), {}
    except Exception:
        pass
    out = np.zeros((b1 - b0, *arr.shape[1:]), arr.dtype)
    failed: dict[int, str] = {}
    for c0 in range(b0, b1, chunk_rows):
        c1 = min(b1, c0 + chunk_rows)
        try:
            out[c0 - b0 : c1 - b0] = arr[c0:c1]
        except Exception as e:
            failed[c0 // chunk_rows] = _one_line(e)
    return out, failed


def _attribute_mismatches(
    rel: str,
    key_of: Callable[[int], str],
    chunk_rows: int,
    starts: np.ndarray,
    stops: np.ndarray,
    mismatched: list[int],
) -> list[Damage]:
    """Name the chunk(s) behind each episode whose hash differs: a chunk holding a whole
    mismatching episode is named alone; an episode spanning chunks with no such culprit names
    its chunk range."""
    spans = {
        i: (int(starts[i]) // chunk_rows, (int(stops[i]) - 1) // chunk_rows) for i in mismatched
    }
    culprits: dict[int, list[int]] = {}
    for i, (c0, c1) in spans.items():
        if c0 == c1:
            culprits.setdefault(c0, []).append(i)
    ranges: dict[tuple[int, int], list[int]] = {}
    for i, (c0, c1) in spans.items():
        if c0 == c1:
            continue
        hit = [c for c in range(c0, c1 + 1) if c in culprits]
        if hit:
            culprits[hit[0]].append(i)
        else:
            ranges.setdefault((c0, c1), []).append(i)
    found = [
        Damage(f"{rel}/{key_of(c)}", "differs from its checksum", tuple(sorted(eps)))
        for c, eps in sorted(culprits.items())
    ]
    found += [
        Damage(f"{rel}/{key_of(c0)}..{key_of(c1)}", "differs from its checksum", tuple(eps))
        for (c0, c1), eps in sorted(ranges.items())
    ]
    return found


def _ints(values: Iterable[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _span(episodes: Sequence[int]) -> str:
    if len(episodes) == 1:
        return f"episode {episodes[0]}"
    if list(episodes) == list(range(episodes[0], episodes[-1] + 1)):
        return f"episodes {episodes[0]}-{episodes[-1]}"
    head = ", ".join(str(e) for e in episodes[:5])
    return f"episodes {head}{', ...' if len(episodes) > 5 else ''} ({len(episodes)})"


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")
