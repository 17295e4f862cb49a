"""The DSRL loop finds the noise that cancels a steerable base's bias on a tiny task, counts
env steps and episodes, and refuses budgets that never train."""

import numpy as np
import pytest
import torch
from toy import STATE_STATS, PointGoal, SteerablePointBase

from robotrl.algos.dsrl import DSRLConfig
from robotrl.algos.dsrl_training import DSRLTrainConfig, train_dsrl
from robotrl.algos.residual import StateFeaturizer


def _feat() -> StateFeaturizer:
    return StateFeaturizer(["state/pos", "state/goal"], STATE_STATS)


CFG = DSRLConfig(hidden=64, batch_size=128, utd=4)


@pytest.mark.slow
def test_dsrl_steers_a_biased_base_to_90_percent():
    base = SteerablePointBase(bias=(0.5, -0.5), noise_gain=0.5)
    train = DSRLTrainConfig(
        total_steps=6000, warmup_steps=300, eval_every=500, eval_episodes=30, target_success=0.9
    )
    res = train_dsrl(base, PointGoal, _feat(), CFG, train, execute_horizon=2, progress=False)
    first, last = res.evaluations[0], res.evaluations[-1]
    assert first["success_rate"] <= 0.3  # the base from its prior's mean noise
    assert last["success_rate"] >= 0.9, res.evaluations
    assert res.steps_to_target == last["env_steps"] < train.total_steps


@pytest.mark.slow
def test_env_steps_and_episodes_are_counted_over_envs():
    base = SteerablePointBase()
    train = DSRLTrainConfig(total_steps=400, warmup_steps=100, eval_every=10_000, eval_episodes=2)
    res = train_dsrl(
        base, PointGoal, _feat(), CFG, train, num_envs=2, execute_horizon=3, progress=False
    )
    assert res.env_steps == 400
    assert len(res.evaluations) == 1  # the base only
    assert sum(e["length"] for e in res.episodes) <= 400
    assert all(0 < e["length"] <= 30 for e in res.episodes)
    assert res.agent.updates > 0


def test_a_budget_without_training_is_refused():
    train = DSRLTrainConfig(total_steps=100, warmup_steps=100)
    with pytest.raises(ValueError, match="warmup_steps"):
        train_dsrl(SteerablePointBase(), PointGoal, _feat(), CFG, train, progress=False)


@pytest.mark.slow
def test_same_seed_same_curve():
    train = DSRLTrainConfig(total_steps=600, warmup_steps=100, eval_every=300, eval_episodes=5)
    runs = [
        train_dsrl(
            SteerablePointBase(),
            PointGoal,
            _feat(),
            CFG,
            train,
            execute_horizon=2,
            progress=False,
        )
        for _ in range(2)
    ]
    a, b = ([e["success_rate"] for e in r.evaluations] for r in runs)
    assert a == b
    np.testing.assert_array_equal(
        [e["success"] for e in runs[0].episodes], [e["success"] for e in runs[1].episodes]
    )


@pytest.mark.parametrize(("keep_best", "kept"), [(True, 1), (False, 2)])
def test_the_agent_kept_is_the_one_of_the_best_evaluation(monkeypatch, keep_best, kept):
    import robotrl.algos.dsrl_training as dt

    seen, rates = [], iter([0.0, 0.5, 0.25])

    def scripted_evaluation(agent, *args, **kwargs):
        seen.append({k: v.clone() for k, v in agent.state_dict().items()})
        return {"success_rate": next(rates)}

    monkeypatch.setattr(dt, "evaluate_dsrl", scripted_evaluation)
    train = DSRLTrainConfig(
        total_steps=400, warmup_steps=100, eval_every=200, eval_episodes=1, keep_best=keep_best
    )
    res = train_dsrl(
        SteerablePointBase(), PointGoal, _feat(), CFG, train, execute_horizon=2, progress=False
    )
    assert len(seen) == 3 and res.kept_step == 200 * kept
    assert not all(torch.equal(v, seen[2][k]) for k, v in seen[1].items())  # updates moved it
    assert all(torch.equal(v, seen[kept][k]) for k, v in res.agent.state_dict().items())
