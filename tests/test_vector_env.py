"""SlicedVectorEnv: Gymnasium's vector API over env slices in this and worker processes."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from toy import PointGoal

import sim
from sim.vector_env import SlicedVectorEnv, reset_seeds, stack_obs


def _point(horizon: int = 3):
    return lambda: PointGoal(tol=0.0, horizon=horizon)  # never succeeds: ends by truncation


def _single_rollout(seed: int, actions: np.ndarray) -> list[np.ndarray]:
    env = sim.make("reach")
    obs, _ = env.reset(seed=seed)
    out = [obs["state/ee_pos"]]
    for a in actions:
        obs, *_ = env.step(a)
        out.append(obs["state/ee_pos"])
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_slices_step_like_single_envs(workers):
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (4, 3, 7)).astype(np.float32)  # steps x envs x Da
    venv = sim.make_vec("reach", 3, workers=workers)
    try:
        assert venv.workers == workers
        obs, _ = venv.reset(seed=5)
        got = [obs["state/ee_pos"]]
        for a in actions:
            obs, *_ = venv.step(a)
            got.append(obs["state/ee_pos"])
    finally:
        venv.close()
    for i in range(3):
        want = _single_rollout(5 + i, actions[:, i])
        np.testing.assert_allclose(np.stack(got)[:, i], np.stack(want), atol=1e-9)


def test_slices_are_contiguous_and_cover_every_env():
    venv = SlicedVectorEnv([_point()] * 5, workers=2)
    try:
        slices = [list(s) for s in venv.slices]
        assert len(slices) == 2 and [i for s in slices for i in s] == [0, 1, 2, 3, 4]
        assert {len(s) for s in slices} == {2, 3}
    finally:
        venv.close()


def test_next_step_autoreset_returns_the_first_observation_with_zero_reward():
    venv = SlicedVectorEnv([_point(horizon=2)] * 2, workers=2)
    try:
        venv.reset(seed=0)
        a = np.ones((2, 2), np.float32)
        _, _, _, trunc1, _ = venv.step(a)
        _, _, _, trunc2, _ = venv.step(a)
        assert not trunc1.any() and trunc2.all()
        obs, reward, term, trunc, _ = venv.step(a)  # the autoreset step
        assert (reward == 0).all() and not term.any() and not trunc.any()
        np.testing.assert_allclose(obs["state/pos"], 0.0)  # back at the start
    finally:
        venv.close()


def test_disabled_autoreset_resets_only_the_masked_envs():
    venv = SlicedVectorEnv(
        [_point(horizon=50)] * 3, workers=2, autoreset_mode=AutoresetMode.DISABLED
    )
    try:
        obs0, _ = venv.reset(seed=[1, 2, 3])
        moved, *_ = venv.step(np.ones((3, 2), np.float32))
        obs, _ = venv.reset(seed=[1, 2, 3], options={"reset_mask": np.array([True, False, True])})
        np.testing.assert_allclose(obs["state/pos"][[0, 2]], obs0["state/pos"][[0, 2]])
        np.testing.assert_allclose(obs["state/pos"][1], moved["state/pos"][1])
        assert not np.allclose(moved["state/pos"][1], obs0["state/pos"][1])
    finally:
        venv.close()


def test_infos_use_gymnasiums_layout():
    venv = sim.make_vec("reach", 2, workers=2)
    try:
        venv.reset(seed=0)
        _, _, _, _, info = venv.step(np.zeros((2, 7), np.float32))
        assert info["success"].shape == (2,) and info["_success"].all()
        assert info["safety"]["nan"].shape == (2,)
    finally:
        venv.close()


def test_per_env_view_and_attributes():
    venv = sim.make_vec("reach", 2, workers=2, autoreset_mode=AutoresetMode.DISABLED)
    try:
        venv.reset(seed=0)
        results = venv.step_each(np.zeros((2, 7), np.float32))
        assert len(results) == 2 and results[1][0]["state/ee_pos"].shape == (3,)
        obs, info = venv.reset_one(1, seed=7)
        assert obs["state/ee_pos"].shape == (3,) and "success" in info
        assert venv.env_attributes(["max_dpos", "nope"]) == {"max_dpos": 0.02}
        assert venv.get_attr("control_hz") == (20.0, 20.0)
    finally:
        venv.close()


def test_bad_actions_and_seeds_get_one_line_errors():
    venv = SlicedVectorEnv([_point()] * 2, workers=2)
    try:
        venv.reset(seed=0)
        with pytest.raises(ValueError, match="actions must have 2 rows"):
            venv.step(np.zeros((3, 2), np.float32))
        with pytest.raises(ValueError, match="need 2 seeds"):
            venv.reset(seed=[1, 2, 3])
    finally:
        venv.close()
    with pytest.raises(RuntimeError, match="closed"):
        venv.step(np.zeros((2, 2), np.float32))


def test_an_error_in_a_worker_is_raised_in_the_parent_and_the_env_goes_on():
    venv = SlicedVectorEnv([_point()] * 2, workers=2)
    try:
        venv.reset(seed=0)
        bad = np.array([[0.0, 0.0], [np.nan, 0.0]], np.float32)  # env 1 lives in worker 1
        with pytest.raises(RuntimeError, match=r"worker 1: ValueError: action must be finite"):
            venv.step(bad)
        with pytest.raises(ValueError, match="action must be finite"):  # env 0: this process
            venv.step(bad[::-1])
        obs, *_ = venv.step(np.zeros((2, 2), np.float32))  # every answer was read
        assert obs["state/pos"].shape == (2, 2)
    finally:
        venv.close()


def test_a_dead_worker_is_reported_with_its_exit_code():
    venv = SlicedVectorEnv([_point()] * 2, workers=2)
    try:
        venv.reset(seed=0)
        os.kill(venv._handles[1].proc.pid, signal.SIGKILL)
        venv._handles[1].proc.join(timeout=10)
        with pytest.raises(RuntimeError, match=r"worker 1 \(pid \d+\) died, exit code -9"):
            venv.step(np.zeros((2, 2), np.float32))
    finally:
        venv.close()


def test_a_ctrl_c_leaves_the_workers_to_the_parent():
    """A Ctrl-C in a terminal reaches every process of the group: the workers ignore it, and
    the parent decides whether the job stops (robotrl.stop_request)."""
    venv = SlicedVectorEnv([_point(horizon=50)] * 2, workers=2)
    try:
        venv.reset(seed=0)
        os.kill(venv._handles[1].proc.pid, signal.SIGINT)
        for _ in range(20):
            venv.step(np.zeros((2, 2), np.float32))
        assert venv._handles[1].proc.is_alive()
    finally:
        venv.close()


def test_a_failing_env_factory_fails_the_constructor():
    def broken():
        raise OSError("no display")

    with pytest.raises(RuntimeError, match="worker 1: OSError: no display"):
        SlicedVectorEnv([_point(), broken], workers=2)


def test_helpers():
    assert reset_seeds(3, 2) == [3, 4]
    assert reset_seeds(None, 2) == [None, None]
    assert reset_seeds([5, None], 2) == [5, None]
    with pytest.raises(ValueError, match="need 2 seeds"):
        reset_seeds([1], 2)
    stacked = stack_obs([{"a": np.zeros(2)}, {"a": np.ones(2)}])
    assert stacked["a"].shape == (2, 2)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        SlicedVectorEnv([_point()], workers=0)


def test_returned_observations_are_never_written_later():
    venv = SlicedVectorEnv(
        [_point(horizon=50)] * 2, workers=2, autoreset_mode=AutoresetMode.DISABLED
    )
    try:
        with pytest.raises(RuntimeError, match="call reset"):
            venv.step(np.zeros((2, 2), np.float32))
        obs, _ = venv.reset(seed=0, options={"reset_mask": np.array([False, True])})
        np.testing.assert_array_equal(obs["state/goal"][0], 0.0)  # not reset yet: zeros
        assert np.abs(obs["state/goal"][1]).sum() > 0
        venv.reset(seed=0)
        moved, *_ = venv.step(np.ones((2, 2), np.float32))
        before = moved["state/pos"].copy()
        venv.reset(seed=0, options={"reset_mask": np.array([True, False])})
        np.testing.assert_array_equal(moved["state/pos"], before)
    finally:
        venv.close()
