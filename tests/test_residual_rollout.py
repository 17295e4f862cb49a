"""The rollout emits each transition once, with s' / a_b' equal to the next step's s / a_b
within an episode, terminal ones at once, and a human's action in place of the proposed one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from toy import STATE_STATS, BiasedPointBase, PointGoal

from robotrl.algos.residual import StateFeaturizer
from robotrl.algos.residual_rollout import ResidualRollout


def test_transitions_chain_and_end_at_episode_boundaries():
    feat = StateFeaturizer(["state/pos", "state/goal"], STATE_STATS)
    calls = []

    def human(env_id, obs, proposed):
        calls.append(env_id)
        return np.zeros(2, np.float32) if len(calls) % 5 == 0 else None

    r = ResidualRollout(
        BiasedPointBase(),
        lambda: PointGoal(horizon=10),
        feat,
        num_envs=2,
        execute_horizon=2,
        intervener=human,
    )
    got = []
    with pytest.raises(RuntimeError, match="observe"):
        r.step(np.zeros((2, 2), np.float32), got.append)
    for _ in range(25):
        _feats, a_b = r.observe(got.append)
        r.step(np.clip(a_b + 0.1, -1, 1), got.append)
    r.close()
    assert r.env_steps == 50 and len(calls) == 50
    per_env = [[t for t in got if t.env_id == e] for e in range(2)]
    assert sum(len(p) for p in per_env) == 50 - sum(t is not None for t in r._pending)
    for p in per_env:
        for t, nxt in itertools.pairwise(p):
            if not (t.terminated or t.truncated):
                np.testing.assert_array_equal(t.next_features, nxt.features)
                np.testing.assert_array_equal(t.next_base_action, nxt.base_action)
        ends = [t for t in p if t.truncated or t.terminated]
        assert ends and all(e.truncated or e.terminated for e in ends)
    humans = [t for t in got if t.intervention]
    assert humans and all(np.all(t.action == 0) for t in humans)
    assert len(r.episodes) >= 4 and {e["length"] for e in r.episodes} <= set(range(1, 11))
