"""The residual loop learns to cancel a biased base on a tiny task, demos help, interventions
are stored and counted."""

import numpy as np

from robotrl.algos.residual import ResidualConfig, StateFeaturizer
from robotrl.algos.residual_training import TrainConfig, train_residual
from sim.toy import STATE_STATS, BiasedPointBase, PointGoal

# No residual penalty here: cancelling this bias needs residuals at the scale bound.
CFG = dict(
    scale=0.5,
    hidden=64,
    ensemble=5,
    batch_size=128,
    utd=2,
    actor_lr=3e-4,
    residual_l2=0.0,
    critic_lr=3e-4,
)


def _feat():
    return StateFeaturizer(["state/pos", "state/goal"], STATE_STATS)


def test_residual_lifts_a_biased_base_to_90_percent():
    base = BiasedPointBase(bias=(0.5, -0.5))
    train = TrainConfig(
        total_steps=4000,
        warmup_steps=300,
        critic_warmup_updates=200,
        eval_every=500,
        eval_episodes=30,
        target_success=0.9,
    )
    res = train_residual(
        base, PointGoal, _feat(), ResidualConfig(**CFG), train, execute_horizon=1, progress=False
    )
    first, last = res.evaluations[0], res.evaluations[-1]
    assert first["success_rate"] <= 0.3  # the base alone
    assert last["success_rate"] >= 0.9, res.evaluations
    # The learned residual leans against the bias (0.5, -0.5).
    assert last["residual_mean_0"] < -0.2 and last["residual_mean_1"] > 0.2


def test_interventions_are_counted_and_replace_the_action():
    calls = []

    def human(env_id, obs, proposed):
        calls.append(proposed.copy())
        if len(calls) % 3 == 0:  # take over every third step, steering straight at the goal
            return np.clip(2.0 * (obs["state/goal"] - obs["state/pos"]), -1, 1)
        return None

    train = TrainConfig(
        total_steps=300,
        warmup_steps=100,
        critic_warmup_updates=10,
        eval_every=10_000,
        eval_episodes=2,
    )
    res = train_residual(
        BiasedPointBase(),
        PointGoal,
        _feat(),
        ResidualConfig(**CFG),
        train,
        execute_horizon=1,
        intervener=human,
        progress=False,
    )
    rates = [e["intervention_rate"] for e in res.episodes]
    assert res.env_steps == 300 and len(calls) == 300
    assert 0.25 < np.mean(rates) < 0.4
