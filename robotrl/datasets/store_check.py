"""Consistency check and repair of an :class:`~robotrl.datasets.episode_store.EpisodeStore`.

:func:`verify` never modifies the store and never raises for a bad store: it returns a report
(``ok`` is False when committed data is damaged; ``clean`` is False when there is leftover
garbage from an interrupted commit, which :func:`repair` removes). The commit record in the
root attributes (N episodes, T steps) is the source of truth; rows beyond it are dangling.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from robotrl.datasets.episode_store import (
    FINAL_PREFIX,
    META_FIELDS,
    EpisodeStore,
    EpisodeStoreError,
)

READ_BLOCK_BYTES = 64 << 20  # decode check reads this much per block


def verify(path: str | os.PathLike[str], *, check_chunks: bool = True) -> dict[str, Any]:
    """Check a store: episode_ends monotonic and ending at T, every data array T rows long with
    the recorded shape/dtype, every meta array N long, and (``check_chunks``) every committed
    chunk decodable.

    Returns ``{"path", "ok", "clean", "num_episodes", "num_steps", "errors": [str],
    "warnings": [str]}``.
    """
    report: dict[str, Any] = {"path": str(path), "errors": [], "warnings": []}
    errors, warnings = report["errors"], report["warnings"]
    try:
        store = EpisodeStore.open(path, mode="r")
    except EpisodeStoreError as e:
        errors.append(str(e))
        return _finish(report)
    n, t = store.num_episodes, store.num_steps
    report.update(num_episodes=n, num_steps=t)
    try:
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
            expected = n
            if name not in META_FIELDS and name != "episode_ends":
                key = name.removeprefix(FINAL_PREFIX)
                if not name.startswith(FINAL_PREFIX) or key not in store.attrs["keys"]:
                    warnings.append(f"meta/{name} is not in the schema (dangling)")
                    continue
            _check_length(f"meta/{name}", arr.shape[0], expected, errors, warnings)
            if check_chunks:
                _check_decodable(f"meta/{name}", arr, expected, errors)
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
            if check_chunks:
                _check_decodable(f"data/{name}", arr, t, errors)
        warnings.extend(f"data/{name} is not in the schema (dangling)" for name in present)
        for f in _partial_files(Path(path)):
            warnings.append(f"leftover temporary file {f}")
    except Exception as e:  # a damaged store must give a report, not a traceback
        errors.append(f"unexpected error while checking: {e!r}")
    finally:
        store.close()
    return _finish(report)


def repair(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Remove what an interrupted commit left behind (rows beyond the commit record, arrays not
    in the schema, temporary files). Committed episodes are never touched. Returns
    ``{"path", "actions": [str], "verify": report}``; raises EpisodeStoreError if the store
    cannot be opened (foreign, or its committed data is damaged)."""
    with EpisodeStore.open(path, mode="a") as store:
        actions = store._repair_actions
    return {"path": str(path), "actions": actions, "verify": verify(path)}


def repair_open_store(store: EpisodeStore) -> None:
    """Called by ``EpisodeStore.open(mode="a")``: repair, then refuse damaged stores."""
    report = verify(store.path, check_chunks=False)
    if not report["ok"]:
        raise EpisodeStoreError(
            f"{store.path}: committed data is damaged and cannot be repaired automatically: "
            + "; ".join(report["errors"])
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
                else name in META_FIELDS
                or name == "episode_ends"
                or name.removeprefix(FINAL_PREFIX) in store.attrs["keys"]
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


def _check_length(name: str, have: int, want: int, errors: list, warnings: list) -> None:
    if have < want:
        errors.append(f"{name} has {have} rows, the commit record needs {want}")
    elif have > want:
        warnings.append(f"{name} has {have - want} rows beyond the commit record (dangling)")


def _check_decodable(name: str, arr: Any, rows: int, errors: list) -> None:
    row_bytes = max(1, int(np.prod(arr.shape[1:])) * arr.dtype.itemsize)
    block = max(1, READ_BLOCK_BYTES // row_bytes)
    for start in range(0, rows, block):
        try:
            arr[start : min(rows, start + block)]
        except Exception as e:
            errors.append(f"{name} rows {start}..{start + block} cannot be decoded: {e!r}")
            return


def _partial_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.partial"))


def _finish(report: dict[str, Any]) -> dict[str, Any]:
    report["ok"] = not report["errors"]
    report["clean"] = report["ok"] and not report["warnings"]
    return report
