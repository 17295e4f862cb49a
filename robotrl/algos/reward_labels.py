"""Labelled frames for the success reward classifier: labels, episode splits, class sampling.

Shape letters: L steps of one episode, N frames, E episodes.

Which observation shows success. The store keeps, for step t, the observation o_t *before*
action a_t and the reward r_t earned by a_t, i.e. r_t judges o_{t+1}; the observation after the
last action is ``final_obs``. So the frames of an episode are o_0 .. o_L (L + 1 of them when
``final_obs`` is stored) and frame o_{t+1} shows the task achieved iff r_t > 0 (sparse 0/1
reward, as ``sim`` and ``robotrl collect`` record it). Envs that end the episode on success
(the default) therefore give exactly one achieved frame per successful episode: the final one.

Labels (int8 per frame): 1 positive, 0 negative, -1 ignored (used by neither training nor
frame-level metrics).

- positive: every frame that shows the task achieved (previous step's reward > 0), plus, in a
  successful episode, the ``positive_window - 1`` frames before the first achieved frame. With
  no reward at all (hardware: the operator labels success) the first achieved frame is the last
  one, so the rule becomes "the last k frames of successful episodes".
- ignored: the ``ignore_before`` frames just before the positive window of a successful episode:
  the task is nearly achieved there and the camera cannot tell (a cube at 11 cm vs 12 cm is
  under a pixel at 64 px), so they would teach contradictions as negatives.
- negative: everything else, including every frame of a failed episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robotrl.datasets import EpisodeStore

POSITIVE, NEGATIVE, IGNORED = 1, 0, -1


def label_episode(
    reward: np.ndarray,
    success: bool,
    has_final: bool,
    positive_window: int = 1,
    ignore_before: int = 0,
) -> np.ndarray:
    """Frame labels of one episode.

    Args:
        reward: (L,) per-step reward, sparse 0/1 (r_t judges the observation after step t).
        success: the episode's success flag (store meta ``success``).
        has_final: the store holds ``final_obs`` (then there are L + 1 frames).
        positive_window: k >= 1 frames labelled positive up to the first achieved frame.
        ignore_before: frames before the window labelled ignored (-1).

    Returns:
        (L + 1,) or (L,) int8 labels in {1, 0, -1}.
    """
    reward = np.asarray(reward, dtype=np.float64).reshape(-1)
    if positive_window < 1:
        raise ValueError(f"positive_window must be >= 1, got {positive_window}")
    if ignore_before < 0:
        raise ValueError(f"ignore_before must be >= 0, got {ignore_before}")
    if not np.all(np.isin(reward, (0.0, 1.0))):
        raise ValueError(
            "labels from the reward need a sparse 0/1 reward (sim reward_type='sparse'); got "
            f"values {np.unique(reward)[:5].tolist()}"
        )
    n = len(reward) + 1 if has_final else len(reward)
    achieved = np.zeros(n, dtype=bool)
    achieved[1:] = reward[: n - 1] > 0  # frame t + 1 is judged by the reward of step t
    labels = np.where(achieved, POSITIVE, NEGATIVE).astype(np.int8)
    if success and n > 0:
        first = int(np.argmax(achieved)) if achieved.any() else n - 1
        lo = max(0, first - positive_window + 1)
        labels[lo : first + 1] = POSITIVE
        labels[max(0, lo - ignore_before) : lo] = IGNORED
    return labels


@dataclass
class Frames:
    """Labelled frames of some episodes, in episode order.

    obs: ``{"images/<cam>": (N, H, W, 3) uint8, "state/<k>": (N, D) float32}``;
    labels: (N,) int8; episode: (N,) store episode index; step: (N,) frame index in the episode
    (L for ``final_obs``); success: ``{episode: store success flag}``.
    """

    obs: dict[str, np.ndarray]
    labels: np.ndarray
    episode: np.ndarray
    step: np.ndarray
    success: dict[int, bool]

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, index: np.ndarray) -> dict[str, np.ndarray]:
        """Observations of frames ``index``: ``{key: (n, ...)}``."""
        return {k: v[index] for k, v in self.obs.items()}


def load_frames(
    store: EpisodeStore,
    episodes: Sequence[int],
    keys: Sequence[str],
    positive_window: int = 1,
    ignore_before: int = 0,
) -> Frames:
    """Read the observation ``keys`` and labels of ``episodes`` (see the module docstring)."""
    missing = [k for k in keys if k not in store.keys]
    if missing:
        raise ValueError(f"{store.path} has no {missing}; it has {store.keys}")
    if not episodes:
        raise ValueError("load_frames needs at least one episode")
    obs: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    labels, ep_index, steps = [], [], []
    success: dict[int, bool] = {}
    for ep in store.episodes([int(i) for i in episodes], keys=[*keys, "reward"]):
        i = ep["episode_index"]
        has_final = bool(ep["final_obs_valid"]) and all(k in ep["final_obs"] for k in keys)
        y = label_episode(ep["reward"], ep["success"], has_final, positive_window, ignore_before)
        for k in keys:
            x = ep[k]
            if has_final:
                x = np.concatenate([x, np.asarray(ep["final_obs"][k], dtype=x.dtype)[None]])
            obs[k].append(x)
        labels.append(y)
        ep_index.append(np.full(len(y), int(i), dtype=np.int64))
        steps.append(np.arange(len(y), dtype=np.int64))
        success[int(i)] = bool(ep["success"])
    return Frames(
        obs={k: np.concatenate(v) for k, v in obs.items()},
        labels=np.concatenate(labels),
        episode=np.concatenate(ep_index),
        step=np.concatenate(steps),
        success=success,
    )


def split_by_episode(
    success: np.ndarray, val_ratio: float, test_ratio: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded train / val / test split of episode indices, stratified by episode success.

    Whole episodes go to one side (consecutive frames are near-duplicates, so a frame split
    would leak). Each class is split on its own so every side gets successes and failures when
    there are enough. Returns three sorted, disjoint (E_split,) int64 arrays.
    """
    success = np.asarray(success, dtype=bool)
    if not (0.0 < val_ratio < 1.0 and 0.0 < test_ratio < 1.0 and val_ratio + test_ratio < 1.0):
        raise ValueError(
            f"need 0 < val_ratio, test_ratio and val_ratio + test_ratio < 1, got {val_ratio}, "
            f"{test_ratio}"
        )
    if success.sum() < 3:
        raise ValueError(
            f"need at least 3 successful episodes (one per split), got {int(success.sum())}"
        )
    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[], [], []]
    for cls in (True, False):
        idx = rng.permutation(np.flatnonzero(success == cls))
        n = len(idx)
        n_test = min(max(1, round(n * test_ratio)), n) if n >= 3 else 0
        n_val = min(max(1, round(n * val_ratio)), n - n_test) if n >= 3 else 0
        parts[2].append(idx[:n_test])
        parts[1].append(idx[n_test : n_test + n_val])
        parts[0].append(idx[n_test + n_val :])
    train, val, test = (np.sort(np.concatenate(p)).astype(np.int64) for p in parts)
    return train, val, test


def balanced_batch(
    labels: np.ndarray, batch_size: int, neg_ratio: float, rng: np.random.Generator
) -> np.ndarray:
    """(batch_size,) frame indices: about ``neg_ratio`` negatives per positive, drawn with
    replacement from all positives and all negatives (ignored frames never drawn).

    HIL-SERL trains on 2-3x more negatives than positives; drawing per batch (rather than
    subsampling negatives once) keeps that ratio while every negative frame gets used.
    """
    pos, neg = np.flatnonzero(labels == POSITIVE), np.flatnonzero(labels == NEGATIVE)
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError(
            f"training needs positive and negative frames, got {len(pos)} and {len(neg)}"
        )
    if neg_ratio <= 0:
        raise ValueError(f"neg_ratio must be > 0, got {neg_ratio}")
    n_pos = min(batch_size - 1, max(1, round(batch_size / (1.0 + neg_ratio))))
    return np.concatenate([rng.choice(pos, n_pos), rng.choice(neg, batch_size - n_pos)]).astype(
        np.int64
    )
