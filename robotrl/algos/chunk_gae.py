"""Advantages for chunk-level policy gradients: GAE over chunk steps, and GRPO's group-relative
advantages.

One chunk step executes up to Te env actions; its reward is the sum of their rewards
(undiscounted inside the chunk) and ``gamma`` discounts once per chunk step, as in pi_RL.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def chunk_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    last_value: float,
    gamma: float = 0.99,
    lam: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE(lambda) over one episode's chunk steps.

    Args:
        rewards: (T,) summed reward of each chunk step.
        values: (T,) V(s_t) at the start of each chunk step.
        last_value: V of the state after the last chunk step: 0 when the episode terminated,
            V(final observation) when it was truncated (bootstrap on truncation, not on
            termination).
        gamma: discount per chunk step. lam: GAE lambda.

    Returns:
        ``(advantages (T,), returns (T,))`` with ``returns = advantages + values``.
    """
    r = np.asarray(rewards, np.float64)
    v = np.asarray(values, np.float64)
    if r.ndim != 1 or r.shape != v.shape:
        raise ValueError(f"rewards and values must be (T,) alike, got {r.shape} and {v.shape}")
    adv = np.zeros_like(r)
    nxt_v, acc = float(last_value), 0.0
    for t in range(len(r) - 1, -1, -1):
        delta = r[t] + gamma * nxt_v - v[t]
        acc = delta + gamma * lam * acc
        adv[t] = acc
        nxt_v = v[t]
    return adv, adv + v


def group_advantages(
    returns: Sequence[float],
    groups: Sequence[int],
    successes: Sequence[bool],
    success_range: tuple[float, float] = (0.1, 0.9),
    eps: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray]:
    """GRPO: ``A = (R - mean_g R) / (std_g R + eps)`` within each group of episodes started
    from the same reset state; groups whose mean success lies outside ``success_range``
    (all solved or all failed: no signal) are dropped.

    Args:
        returns: (N,) episode returns. groups: (N,) group id of each episode.
        successes: (N,) episode success flags.

    Returns:
        ``(advantages (N,), keep (N,) bool)``; dropped episodes get advantage 0.
    """
    r = np.asarray(returns, np.float64)
    g = np.asarray(groups)
    s = np.asarray(successes, np.float64)
    if not r.shape == g.shape == s.shape or r.ndim != 1:
        raise ValueError(
            f"returns, groups, successes must be (N,) alike, got {r.shape}, {g.shape}, {s.shape}"
        )
    lo, hi = success_range
    adv, keep = np.zeros_like(r), np.zeros(r.shape, bool)
    for gid in np.unique(g):
        m = g == gid
        if not lo <= s[m].mean() <= hi:
            continue
        adv[m] = (r[m] - r[m].mean()) / (r[m].std() + eps)
        keep[m] = True
    return adv, keep
