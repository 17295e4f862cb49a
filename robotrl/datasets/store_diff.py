"""Compare two episode stores array by array: are two recordings of the same session identical?

Identical means: the same episodes (``meta/episode_ends``), the same per-step arrays (every
observation key, ``action``, ``intervention``, ``reward``) and final observations, and the same
per-episode outcome metadata (``success``, ``terminated``, ``intervention_steps``, ``task`` ...),
compared exactly unless a tolerance is given. Wall-clock fields are left out by default:
``data/timestamp`` ([s] since the episode began: a clock reading for ``robotrl collect``, the
sim stamp for a recording over ROS 2) and ``meta/duration_s`` / ``meta/start_time``.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import numpy as np

from robotrl.datasets.episode_store import EpisodeStore
from robotrl.datasets.integrity import CHECKSUMS

WALL_CLOCK_KEYS = ("timestamp",)
WALL_CLOCK_META = ("duration_s", "start_time")


def _meta_fields(store: EpisodeStore) -> set[str]:
    meta = Path(store.path) / "meta"
    # checksums are derived from the rest (and cover wall-clock fields): never compared
    return {
        p.name
        for p in meta.iterdir()
        if p.is_dir() and not p.name.startswith("final_obs.") and p.name != CHECKSUMS
    }


def diff_stores(
    a: EpisodeStore,
    b: EpisodeStore,
    *,
    ignore_keys: Collection[str] = WALL_CLOCK_KEYS,
    ignore_meta: Collection[str] = WALL_CLOCK_META,
    atol: float = 0.0,
) -> list[str]:
    """Differences between stores ``a`` and ``b`` (empty: identical).

    Args:
        ignore_keys: per-step keys not compared.
        ignore_meta: per-episode metadata fields not compared.
        atol: absolute tolerance of float arrays (0: bit-for-bit equal values).
    Returns:
        one line per difference: key, what differs, the largest deviation.
    """
    out: list[str] = []
    if a.num_episodes != b.num_episodes:
        return [f"episodes: {a.num_episodes} vs {b.num_episodes}"]
    if not np.array_equal(a.episode_ends, b.episode_ends):
        return [f"episode_ends: {a.episode_ends.tolist()} vs {b.episode_ends.tolist()}"]
    keys_a = set(a.keys) - set(ignore_keys)
    keys_b = set(b.keys) - set(ignore_keys)
    if keys_a != keys_b:
        only_a, only_b = sorted(keys_a - keys_b), sorted(keys_b - keys_a)
        out.append(f"keys: only in a {only_a}, only in b {only_b}")
    for key in sorted(keys_a & keys_b):
        out += _diff_array(key, a.get(key), b.get(key), atol)
        final = f"final_obs.{key.replace('/', '.')}"
        if final in _final_names(a) and final in _final_names(b):
            out += _diff_array(final, a.meta(final), b.meta(final), atol)
    fields = (_meta_fields(a) & _meta_fields(b)) - set(ignore_meta)
    for name in sorted(fields):
        out += _diff_array(f"meta/{name}", a.meta(name), b.meta(name), atol)
    return out


def _final_names(store: EpisodeStore) -> set[str]:
    meta = Path(store.path) / "meta"
    return {p.name for p in meta.iterdir() if p.name.startswith("final_obs.")}


def _diff_array(name: str, x: np.ndarray, y: np.ndarray, atol: float) -> list[str]:
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.dtype != y.dtype:
        return [f"{name}: shape/dtype {x.shape} {x.dtype} vs {y.shape} {y.dtype}"]
    if x.dtype.kind == "f":
        dev = np.abs(x.astype(np.float64) - y.astype(np.float64))
        worst = float(dev.max()) if dev.size else 0.0
        if worst > atol or not np.array_equal(np.isnan(x), np.isnan(y)):
            rows = int(np.any(dev.reshape(len(dev), -1) > atol, axis=1).sum()) if dev.ndim else 1
            return [f"{name}: max |a - b| = {worst:.3g} over {rows} rows (atol {atol:g})"]
        return []
    if not np.array_equal(x, y):
        return [f"{name}: {int(np.sum(x != y))} values differ"]
    return []
