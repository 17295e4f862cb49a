"""Rollouts on Ray workers return exactly what the same envs return in this process."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ray not installed (extra 'dist')")

from toy import STATE_STATS, BiasedPointBase, PointGoal  # noqa: E402

import sim  # noqa: E402
from robotrl.algos.residual import StateFeaturizer  # noqa: E402
from robotrl.algos.residual_rollout import ResidualRollout  # noqa: E402
from robotrl.distributed.ray_rollout import RayVectorEnv  # noqa: E402

# Factories pickled by reference to importable modules (Ray workers cannot import this file).
_reach = functools.partial(sim.make, "reach")
_point = functools.partial(PointGoal, horizon=10)


@pytest.fixture(scope="module")
def local_ray():
    # the toy env lives in tests/: Ray's worker processes import it from there
    tests = str(Path(__file__).resolve().parent)
    env = {"PYTHONPATH": os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p)}
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env}
    )
    yield
    ray.shutdown()


def test_bad_sizes_are_refused_before_ray_starts():
    with pytest.raises(ValueError, match="num_workers"):
        RayVectorEnv(_point, 0)
    with pytest.raises(ValueError, match="envs_per_worker"):
        RayVectorEnv(_point, 1, 0)


@pytest.mark.slow
def test_ray_vector_env_matches_local_envs(local_ray):
    venv = RayVectorEnv(_reach, num_workers=2, envs_per_worker=1)
    try:
        assert venv.num_envs == 2 and venv.single_observation_space == _reach().observation_space
        assert venv.env_attributes(["max_dpos", "nope"]) == {"max_dpos": 0.02}
        obs, _ = venv.reset(seed=10)
        actions = np.tile(np.array([0.5, 0, 0, 0, 0, 0, -1], np.float32), (2, 1))
        for _ in range(3):
            obs, _, _, _, info = venv.step(actions)
        assert obs["state/ee_pos"].shape == (2, 3) and info["success"].shape == (2,)
        for i in range(2):
            env = _reach()
            env.reset(seed=10 + i)
            for _ in range(3):
                o, *_ = env.step(actions[i])
            np.testing.assert_allclose(obs["state/ee_pos"][i], o["state/ee_pos"], atol=1e-6)
        # reset_mask: env 1 keeps its observation, env 0 starts over
        obs2, _ = venv.reset(seed=[10, None], options={"reset_mask": np.array([True, False])})
        np.testing.assert_array_equal(obs2["state/ee_pos"][1], obs["state/ee_pos"][1])
        assert not np.allclose(obs2["state/ee_pos"][0], obs["state/ee_pos"][0])
        with pytest.raises(ValueError, match="2 rows"):
            venv.step(actions[:1])
        bad = np.zeros((2, 3), np.float32)
        with pytest.raises(RuntimeError, match=r"worker 1: ValueError: action must have shape"):
            venv.step(bad)
        obs, *_ = venv.step(actions)  # every worker's answer was read: the env goes on
        assert obs["state/ee_pos"].shape == (2, 3)
    finally:
        venv.close()


@pytest.mark.slow
def test_residual_rollout_on_ray_workers_emits_the_same_transitions(local_ray):
    feat = StateFeaturizer(["state/pos", "state/goal"], STATE_STATS)
    runs = []
    for vector_env in (None, RayVectorEnv(_point, num_workers=2, envs_per_worker=2)):
        r = ResidualRollout(
            BiasedPointBase(), _point, feat, num_envs=4, execute_horizon=2, vector_env=vector_env
        )
        got = []
        for _ in range(30):  # 3 episodes of 10 steps per env
            _, a_b = r.observe(got.append)
            r.step(np.clip(a_b + 0.1, -1, 1), got.append)
        r.close()
        runs.append((got, r.episodes))
    (local, local_eps), (remote, remote_eps) = runs
    assert len(local) == len(remote) > 100
    for a, b in zip(local, remote, strict=True):
        assert a.env_id == b.env_id and a.reward == b.reward and a.truncated == b.truncated
        np.testing.assert_array_equal(a.features, b.features)
        np.testing.assert_array_equal(a.next_features, b.next_features)
    assert local_eps == remote_eps and len(local_eps) >= 8


@pytest.mark.slow
def test_flow_pg_rollout_takes_the_ray_vector_env(local_ray):
    """The worker API the flow-PG trainer uses: FlowRollout over RayVectorEnv collects the same
    episodes (returns, lengths, sampled denoising chains) as over an in-process vector env."""
    import torch
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    from policies.flow_matching import FlowMatchingPolicy
    from robotrl.algos.flow_rollout import FlowRollout

    torch.manual_seed(0)
    stats = {
        "state/pos": {"mean": np.zeros(2), "std": np.ones(2)},
        "state/goal": {"mean": np.zeros(2), "std": np.ones(2)},
        "action": {"min": -np.ones(2), "max": np.ones(2)},
    }
    policy = FlowMatchingPolicy(
        {"state/pos": 2, "state/goal": 2}, action_dim=2, obs_horizon=1, action_horizon=2,
        num_steps=2, hidden=32, depth=1, obs_feature_dim=16, stats=stats,
    ).eval()  # fmt: skip
    local = SyncVectorEnv([_point, _point], autoreset_mode=AutoresetMode.DISABLED)
    remote = RayVectorEnv(_point, num_workers=2)
    got = []
    for venv in (local, remote):
        rollout = FlowRollout(policy, venv, "noise_net", 2, seed=5)
        groups = rollout.collect(60)
        rollout.close()
        got.append([(ep.env_id, ep.seed, ep.ret, ep.length) for g in groups for ep in g])
        got.append(np.concatenate([s.chain.ravel() for g in groups for ep in g for s in ep.steps]))
    assert len(got[0]) >= 4
    assert got[0] == got[2]
    np.testing.assert_allclose(got[1], got[3], rtol=1e-5)
