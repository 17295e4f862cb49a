"""Sequence windows for behaviour cloning from an :class:`EpisodeStore`.

Shape letters: B batch, To observation horizon, Ta action horizon, Da action dim.

A sample is anchored at a step ``t`` of an episode (every step is an anchor). It holds the
observations of steps ``t-To+1 .. t`` and the actions of steps ``t .. t+Ta-1``; indices that
fall before the episode start repeat its first step and those past its end repeat its last
step (edge padding, as diffusion_policy's SequenceSampler with ``pad_before=To-1``,
``pad_after=Ta-1``). Windows never cross an episode boundary.

When the needed arrays fit in ``cache_bytes`` they are decoded into memory once, and a batch
is one fancy-index per key (:meth:`SequenceDataset.__getitems__`); otherwise every sample is
read from zarr.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler

from robotrl.datasets.episode_store import EpisodeStore

DEFAULT_CACHE_BYTES = 4 << 30  # decode into RAM up to this size (the dev machines have 24 GB)
STATS_BLOCK_ROWS = 65536


def window_indices(
    episode_ends: np.ndarray, obs_horizon: int, action_horizon: int, episode_mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of every sample of the selected episodes.

    Args:
        episode_ends: (N,) int64 cumulative episode ends.
        obs_horizon: To >= 1. action_horizon: Ta >= 1.
        episode_mask: (N,) bool, episodes to draw samples from.

    Returns:
        obs_idx (M, To) int64 and act_idx (M, Ta) int64 global row indices, edge-padded.
    """
    if obs_horizon < 1 or action_horizon < 1:
        raise ValueError(f"horizons must be >= 1, got To={obs_horizon} Ta={action_horizon}")
    ends = np.asarray(episode_ends, dtype=np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    mask = np.asarray(episode_mask, dtype=bool)
    if mask.shape != ends.shape:
        raise ValueError(f"episode_mask shape {mask.shape} != episode_ends shape {ends.shape}")
    lengths = (ends - starts)[mask]
    anchors = np.concatenate(
        [np.arange(s, e) for s, e in zip(starts[mask], ends[mask], strict=True)]
        or [np.zeros(0, np.int64)]
    ).astype(np.int64)
    lo = np.repeat(starts[mask], lengths)[:, None]
    hi = np.repeat(ends[mask], lengths)[:, None] - 1
    obs_idx = np.clip(anchors[:, None] + np.arange(-obs_horizon + 1, 1), lo, hi)
    act_idx = np.clip(anchors[:, None] + np.arange(action_horizon), lo, hi)
    return obs_idx, act_idx


def split_episodes(
    num_episodes: int, val_ratio: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded train/val split by episode: (train_mask, val_mask), (N,) bool, disjoint.

    With ``val_ratio > 0`` and N >= 2 there is at least one episode on each side.
    """
    if not 0.0 <= val_ratio < 1.0:
        raise ValueError(f"val_ratio must be in [0, 1), got {val_ratio}")
    val = np.zeros(num_episodes, dtype=bool)
    if val_ratio > 0 and num_episodes >= 2:
        n_val = min(max(1, round(num_episodes * val_ratio)), num_episodes - 1)
        val[np.random.default_rng(seed).choice(num_episodes, size=n_val, replace=False)] = True
    return ~val, val


def selected_runs(
    episode_ends: np.ndarray, episode_mask: np.ndarray, max_rows: int | None = None
) -> list[tuple[int, int]]:
    """Row ranges [r0, r1) covering the selected episodes: consecutive selected episodes are
    merged, and a range longer than ``max_rows`` is split."""
    ends = np.asarray(episode_ends, dtype=np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    runs: list[tuple[int, int]] = []
    for i in np.flatnonzero(np.asarray(episode_mask, bool)):
        if runs and runs[-1][1] == starts[i]:
            runs[-1] = (runs[-1][0], int(ends[i]))
        else:
            runs.append((int(starts[i]), int(ends[i])))
    if max_rows is None:
        return runs
    return [(b, min(r1, b + max_rows)) for r0, r1 in runs for b in range(r0, r1, max_rows)]


def compute_stats(
    store: EpisodeStore, keys: Sequence[str], episode_mask: np.ndarray | None = None
) -> dict[str, dict[str, np.ndarray]]:
    """Per-dimension normalisation statistics over the rows of the selected episodes.

    Returns ``{key: {"min", "max", "mean", "std"}}``, each float32 of the key's per-step shape
    (population std). Streams the data in blocks, so it works on stores larger than RAM.
    """
    mask = np.ones(store.num_episodes, bool) if episode_mask is None else episode_mask
    runs = selected_runs(store.episode_ends, mask, STATS_BLOCK_ROWS)
    if not runs:
        raise ValueError("no rows selected to compute statistics from")
    out: dict[str, dict[str, np.ndarray]] = {}
    for key in keys:
        arr = store.array(key)
        total, s, ss = 0, 0.0, 0.0
        lo = hi = None
        for r0, r1 in runs:  # only the selected episodes' rows are read (damaged ones are not)
            x = np.asarray(arr[r0:r1], dtype=np.float64)
            total += len(x)
            s = s + x.sum(0)
            ss = ss + np.square(x).sum(0)
            lo = x.min(0) if lo is None else np.minimum(lo, x.min(0))
            hi = x.max(0) if hi is None else np.maximum(hi, x.max(0))
        mean = s / total
        std = np.sqrt(np.maximum(ss / total - np.square(mean), 0.0))
        out[key] = {
            name: np.asarray(v, dtype=np.float32)
            for name, v in (("min", lo), ("max", hi), ("mean", mean), ("std", std))
        }
    return out


class SequenceDataset(Dataset):
    """Torch dataset of (To observations, Ta actions) windows.

    Items are ``{"obs": {key: (To, ...) tensor}, "action": (Ta, Da) float32 tensor,
    "episode": int64 tensor}``; images stay uint8 (To, H, W, 3) so the encoder decides how to
    scale them. Indexing with a list of indices returns the same dict batched (B, ...).

    Args:
        store: the episode store.
        obs_keys: observation keys, e.g. ``["state/ee_pos", "images/front"]``.
        obs_horizon: To. action_horizon: Ta.
        episode_mask: (N,) bool, episodes to use (default all), e.g. from split_episodes.
        action_key: the data key of actions.
        cache_bytes: decode the needed arrays into memory if they fit in this many bytes.
        episode_obs: per-episode observation entries ``{key: (N, ...) array}`` over all N
            episodes of the store, e.g. tokenised instructions ``{"language": (N, L) int64}``;
            each sample gets its episode's row, (...) per item, (B, ...) per batch (no To).
    """

    def __init__(
        self,
        store: EpisodeStore,
        obs_keys: Sequence[str],
        obs_horizon: int,
        action_horizon: int,
        *,
        episode_mask: np.ndarray | None = None,
        action_key: str = "action",
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        episode_obs: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        missing = [k for k in [*obs_keys, action_key] if k not in store.keys]
        if missing:
            raise KeyError(f"keys {missing} not in the store; it has {store.keys}")
        mask = np.ones(store.num_episodes, bool) if episode_mask is None else episode_mask
        self.episode_obs = {k: np.asarray(v) for k, v in (episode_obs or {}).items()}
        for key, value in self.episode_obs.items():
            if len(value) != store.num_episodes or key in obs_keys:
                raise ValueError(
                    f"episode_obs[{key!r}] must have one row per episode ({store.num_episodes}) "
                    f"and not repeat an obs key, got {len(value)} rows"
                )
        self.obs_keys = list(obs_keys)
        self.action_key = action_key
        self.obs_horizon, self.action_horizon = obs_horizon, action_horizon
        self.obs_idx, self.act_idx = window_indices(
            store.episode_ends, obs_horizon, action_horizon, mask
        )
        self.episode_of_row = np.repeat(np.arange(store.num_episodes), store.episode_lengths)
        self._store = store
        keys = [*self.obs_keys, action_key]
        nbytes = sum(
            store.num_steps * np.prod(store.array(k).shape[1:]) * store.array(k).dtype.itemsize
            for k in keys
        )
        self.cached = bool(nbytes <= cache_bytes)
        self._arrays: dict[str, Any] = {
            k: (_read_selected(store, k, mask) if self.cached else store.array(k)) for k in keys
        }

    def __len__(self) -> int:
        return len(self.obs_idx)

    def _gather(self, key: str, idx: np.ndarray) -> torch.Tensor:
        arr = self._arrays[key]
        if self.cached:
            return torch.from_numpy(arr[idx])
        flat = np.unique(idx)  # zarr reads each needed row once
        rows = arr.get_orthogonal_selection(flat)
        return torch.from_numpy(rows[np.searchsorted(flat, idx)])

    def __getitems__(self, indices: Sequence[int]) -> dict[str, Any]:
        """A batch: ``{"obs": {key: (B, To, ...)}, "action": (B, Ta, Da), "episode": (B,)}``."""
        i = np.asarray(indices, dtype=np.int64)
        obs_idx, act_idx = self.obs_idx[i], self.act_idx[i]
        episode = self.episode_of_row[obs_idx[:, -1]]
        obs = {k: self._gather(k, obs_idx) for k in self.obs_keys}
        obs.update({k: torch.from_numpy(v[episode]) for k, v in self.episode_obs.items()})
        return {
            "obs": obs,
            "action": self._gather(self.action_key, act_idx),
            "episode": torch.from_numpy(episode),
        }

    def __getitem__(self, index: int | Sequence[int]) -> dict[str, Any]:
        """One sample (``index`` an int) or a batch (a sequence of ints)."""
        if not np.isscalar(index):
            return self.__getitems__(cast(Sequence[int], index))
        batch = self.__getitems__([int(cast(int, index))])  # isscalar's guard loses the int
        return {
            "obs": {k: v[0] for k, v in batch["obs"].items()},
            "action": batch["action"][0],
            "episode": batch["episode"][0],
        }


def _read_selected(store: EpisodeStore, key: str, episode_mask: np.ndarray) -> np.ndarray:
    """All T rows of ``key`` in memory, only the selected episodes' rows read (others zero):
    episodes left out for damage are never decoded."""
    if np.all(episode_mask):
        return store.get(key)
    arr = store.array(key)
    out = np.zeros((store.num_steps, *arr.shape[1:]), arr.dtype)
    for r0, r1 in selected_runs(store.episode_ends, episode_mask):
        out[r0:r1] = arr[r0:r1]
    return out


def _batch_as_is(batch: Any) -> Any:
    return batch


def make_dataloader(
    dataset: SequenceDataset,
    batch_size: int,
    *,
    shuffle: bool = True,
    drop_last: bool = True,
    seed: int = 0,
    num_workers: int = 0,
) -> DataLoader:
    """DataLoader that fetches each batch with one vectorised ``__getitems__`` call.

    ``seed`` fixes the shuffle order (explicit generator), so runs are reproducible.
    """
    generator = torch.Generator().manual_seed(seed)
    base = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    return DataLoader(
        dataset,
        batch_size=None,
        sampler=BatchSampler(base, batch_size=batch_size, drop_last=drop_last),
        collate_fn=_batch_as_is,
        num_workers=num_workers,
    )
