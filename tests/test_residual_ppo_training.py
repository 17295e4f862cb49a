"""The residual PPO loop learns to cancel a biased base on a tiny task from its sparse reward,
counts env steps over its envs, keeps the agent of its best evaluation and stops on request."""

import threading

import pytest
from toy import STATE_STATS, BiasedPointBase, PointGoal

from robotrl.algos.residual import StateFeaturizer
from robotrl.algos.residual_ppo import ResidualPPOAgent, ResidualPPOConfig
from robotrl.algos.residual_ppo_training import PPORunConfig, train_residual_ppo


def _feat() -> StateFeaturizer:
    return StateFeaturizer(["state/pos", "state/goal"], STATE_STATS)


def _cfg(**kw) -> ResidualPPOConfig:
    small = dict(scale=0.5, hidden=64, num_envs=8, rollout_steps=64, minibatch_size=128, lr=1e-3)
    return ResidualPPOConfig(**{**small, **kw})


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.0, 0.9])
def test_residual_ppo_lifts_a_biased_base_from_its_reward(rho):
    res = train_residual_ppo(
        BiasedPointBase(bias=(0.5, -0.5)),
        PointGoal,
        _feat(),
        _cfg(total_steps=30_000, eval_every=2048, noise_correlation=rho),
        PPORunConfig(eval_episodes=30, target_success=0.9),
        execute_horizon=1,
        progress=False,
    )
    first, last = res.evaluations[0], res.evaluations[-1]
    assert first["success_rate"] <= 0.3  # the base alone
    assert last["success_rate"] >= 0.9, [e["success_rate"] for e in res.evaluations]
    assert res.steps_to_target == last["env_steps"]
    # the mean residual leans against the bias (0.5, -0.5)
    assert last["residual_mean_0"] < -0.2 and last["residual_mean_1"] > 0.2


def test_env_steps_are_counted_over_envs_and_evaluations_come_on_schedule():
    cfg = _cfg(total_steps=2048, eval_every=1024, rollout_steps=32)  # 256 env steps an update
    res = train_residual_ppo(
        BiasedPointBase(), PointGoal, _feat(), cfg, PPORunConfig(eval_episodes=2),
        execute_horizon=2, progress=False,
    )  # fmt: skip
    assert res.env_steps == 2048
    assert [e["env_steps"] for e in res.evaluations] == [0, 1024, 2048]
    assert sum(e["length"] for e in res.episodes) <= 2048
    assert all(0 < e["length"] <= 30 for e in res.episodes)
    assert {"policy_loss", "value_loss", "approx_kl", "residual_std"} <= res.evaluations[-1].keys()


def test_correlated_noise_restarts_with_each_episode_and_is_scored_as_it_was_drawn(monkeypatch):
    """The loop marks every episode's first step (where the noise is drawn afresh), and with a
    learning rate too small to move the agent every update's ratios are 1: the previous steps
    it stores are those the rollout drew from, across episodes and rollouts."""
    starts = []
    sample = ResidualPPOAgent.sample

    def spy(self, obs, base, gen, prev=None):
        starts.append(int(prev["first"].sum()))
        return sample(self, obs, base, gen, prev)

    monkeypatch.setattr(ResidualPPOAgent, "sample", spy)
    cfg = _cfg(total_steps=1024, eval_every=1024, rollout_steps=48, lr=1e-12, noise_correlation=0.9)
    res = train_residual_ppo(
        BiasedPointBase(), PointGoal, _feat(), cfg, PPORunConfig(eval_episodes=2),
        execute_horizon=2, progress=False,
    )  # fmt: skip
    assert starts[0] == cfg.num_envs  # every env starts an episode
    ended = len(res.episodes)
    assert ended > cfg.num_envs and ended - cfg.num_envs <= sum(starts[1:]) <= ended
    last = res.evaluations[-1]
    assert last["approx_kl"] < 1e-9 and last["clip_frac"] == 0.0


@pytest.mark.parametrize(("keep_best", "kept"), [(True, 1), (False, 2)])
def test_the_agent_kept_is_the_one_of_the_best_evaluation(monkeypatch, keep_best, kept):
    import robotrl.algos.residual_ppo_training as rt

    rates = iter([0.0, 0.5, 0.25])
    monkeypatch.setattr(rt, "evaluate_residual", lambda *a, **k: {"success_rate": next(rates)})
    res = train_residual_ppo(
        BiasedPointBase(), PointGoal, _feat(), _cfg(total_steps=1024, eval_every=512),
        PPORunConfig(keep_best=keep_best), execute_horizon=2, progress=False,
    )  # fmt: skip
    assert res.kept_step == [0, 512, 1024][kept]


def test_a_stop_request_ends_the_run_at_its_next_step():
    stop = threading.Event()
    stop.set()
    res = train_residual_ppo(
        BiasedPointBase(), PointGoal, _feat(), _cfg(total_steps=4096), PPORunConfig(),
        execute_horizon=2, progress=False, stop=stop,
    )  # fmt: skip
    assert res.interrupted and res.env_steps == 0 and len(res.evaluations) == 1
