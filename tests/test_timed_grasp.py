"""The timed-grasp stand-in: the task's timing and reward, a base that misses far goals, and a
training run's report."""

import numpy as np
import pytest
import torch

from robotrl.algos.residual import ResidualConfig
from robotrl.algos.residual_ppo import ResidualPPOConfig
from robotrl.algos.residual_ppo_training import PPORunConfig
from robotrl.algos.residual_training import TrainConfig
from robotrl.benchmarks.timed_grasp import (
    KEYS,
    PRESETS,
    AimingBase,
    GraspTiming,
    TimedGrasp,
    featurizer,
    record_demos,
    train_and_evaluate,
)


def _drive_to(env: TimedGrasp, target: np.ndarray) -> tuple[list[float], bool, bool, int]:
    """Steer straight at ``target`` until the episode ends; rewards, terminated, truncated, t."""
    rewards, terminated, truncated = [], False, False
    while not (terminated or truncated):
        a = np.clip((target - env.pos) / env.timing.step, -1.0, 1.0)
        _, r, terminated, truncated, _ = env.step(a)
        rewards.append(r)
    return rewards, terminated, truncated, env.t


def test_a_point_at_the_goal_when_the_gripper_closes_succeeds_hold_steps_later():
    tm = GraspTiming()
    env = TimedGrasp(tm)
    obs, _ = env.reset(seed=3)
    assert set(obs) == set(KEYS)
    rewards, terminated, truncated, t = _drive_to(env, env.goal.copy())
    assert terminated and not truncated
    assert t == tm.close_step + tm.hold
    assert rewards[-1] == 1.0 and sum(rewards) == 1.0  # one sparse reward, at the end


def test_a_point_off_by_more_than_the_tolerance_fails_at_the_horizon():
    tm = GraspTiming()
    env = TimedGrasp(tm)
    env.reset(seed=3)
    rewards, terminated, truncated, t = _drive_to(env, env.goal + np.array([2 * tm.tol, 0.0]))
    assert truncated and not terminated and t == tm.horizon and sum(rewards) == 0.0


def test_the_point_stops_once_the_gripper_closed():
    tm = GraspTiming()
    env = TimedGrasp(tm)
    env.reset(seed=0)
    for _ in range(tm.close_step):
        obs, *_ = env.step(np.array([0.5, 0.0]))
    assert obs["state/closed"][0] == 1.0
    held = env.pos.copy()
    obs, *_ = env.step(np.array([1.0, 1.0]))
    np.testing.assert_array_equal(obs["state/pos"], held.astype(np.float32))


def test_a_bad_action_is_refused():
    env = TimedGrasp()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([np.nan, 0.0]))


def test_the_base_aims_short_of_the_goal():
    tm = GraspTiming()
    base = AimingBase(tm)
    goal = torch.tensor([[[0.4, -0.2]]])
    chunk = base.predict_chunk({"state/pos": torch.zeros(1, 1, 2), "state/goal": goal})
    assert chunk.shape == (1, base.action_horizon, 2)
    # at its aim point the base stops: that point is shrink * goal, short of the goal
    aim = {"state/pos": tm.shrink * goal, "state/goal": goal}
    np.testing.assert_allclose(base.predict_chunk(aim).numpy(), 0.0, atol=1e-6)


def test_features_are_standardised_to_about_unit_scale():
    tm = PRESETS["lift"]
    env = TimedGrasp(tm)
    goals = np.stack([env.reset(seed=s)[0]["state/goal"] for s in range(500)])
    zeros = np.zeros((500, 1))
    obs = {"state/pos": 0 * goals, "state/goal": goals, "state/t": zeros, "state/closed": zeros}
    feats = featurizer(tm)(obs)
    assert feats.shape == (500, 6)
    assert 0.8 < feats[:, 2:4].std() < 1.2


def test_a_run_reports_the_base_the_final_residual_and_its_evaluations():
    tm = GraspTiming()
    train = TrainConfig(
        total_steps=400, warmup_steps=200, critic_warmup_updates=10, eval_every=200,
        eval_episodes=2, seed=0,
    )  # fmt: skip
    cfg = ResidualConfig(hidden=16, ensemble=2, batch_size=16)
    out = train_and_evaluate(tm, cfg, train, episodes=10)
    assert 0.0 <= out["base_success"] < 0.6  # the base misses far goals
    assert 0.0 <= out["success"] <= 1.0
    assert [e["env_steps"] for e in out["evaluations"]] == [0, 200, 400]


def test_the_expert_demos_succeed_and_fill_a_demo_buffer(tmp_path):
    tm = GraspTiming()
    store = record_demos(tmp_path / "d.zarr", tm, episodes=3, seed=300_000)
    try:
        assert store.num_episodes == 3
        assert all(bool(ep["terminated"]) for ep in store.episodes(None))
    finally:
        store.close()
    train = TrainConfig(
        total_steps=300, warmup_steps=200, critic_warmup_updates=5, eval_every=300,
        eval_episodes=1, seed=0,
    )  # fmt: skip
    out = train_and_evaluate(tm, ResidualConfig(hidden=16, ensemble=2), train, demos=2, episodes=2)
    assert [e["env_steps"] for e in out["evaluations"]] == [0, 300]


def test_a_ppo_run_reports_its_evaluations_and_has_no_demo_buffer():
    cfg = ResidualPPOConfig(
        hidden=16, num_envs=2, rollout_steps=50, total_steps=200, eval_every=100
    )
    out = train_and_evaluate(GraspTiming(), cfg, PPORunConfig(eval_episodes=2), episodes=4)
    assert [e["env_steps"] for e in out["evaluations"]] == [0, 100, 200]
    with pytest.raises(ValueError, match="no demo buffer"):
        train_and_evaluate(GraspTiming(), cfg, PPORunConfig(), demos=2)
    with pytest.raises(TypeError, match="ResidualPPOConfig with a PPORunConfig"):
        train_and_evaluate(GraspTiming(), cfg, TrainConfig())


@pytest.mark.slow
def test_residual_ppo_lifts_the_lift_preset_from_reward_alone():
    """What the off-policy residual does not do on this stand-in (docs/rl_methods.md): with
    its defaults (exploration held over the approach, lambda 0.99) within 60 000 env steps."""
    cfg = ResidualPPOConfig(total_steps=60_000)
    out = train_and_evaluate(PRESETS["lift"], cfg, PPORunConfig(eval_episodes=50, seed=0))
    assert out["base_success"] <= 0.3
    assert out["success"] >= 0.9, out["evaluations"]
