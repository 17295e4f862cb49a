"""Consistency check and repair of an :class:`~robotrl.datasets.episode_store.EpisodeStore`.

:func:`verify` never modifies the store and never raises for a bad store: it returns a report
(``ok`` is False when committed data is damaged; ``clean`` is False when there is leftover
garbage from an interrupted commit, which :func:`repair` removes). The commit record in the
root attributes (N episodes, T steps) is the source of truth; rows beyond it are dangling.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from robotrl.datasets.durable_store import write_root_attrs
from robotrl.datasets.episode_store import (
    FINAL_PREFIX,
    META_FIELDS,
    SCHEMA_VERSION,
    EpisodeStore,
    EpisodeStoreError,
)
from robotrl.datasets.integrity import (
    ALGORITHM,
    CHECKSUMS,
    ChecksumItems,
    Damage,
    chain_of,
    content_damage,
    episode_digests,
    merge_damage,
    structure_damage,
)


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
    from robotrl.datasets.store_commit import require_array

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
        e = ends[:n]
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
