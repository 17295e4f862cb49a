"""The residual loop learns to cancel a biased base on a tiny task, demos help, interventions
are stored and counted."""

import numpy as np
import pytest
from recording_bar import RecordingBar
from toy import RESIDUAL_SETTINGS, STATE_STATS, BiasedPointBase, PointGoal

from robotrl.algos.residual import ResidualConfig, StateFeaturizer
from robotrl.algos.residual_rollout import ResidualTransition
from robotrl.algos.residual_training import (
    ResidualReplay,
    TrainConfig,
    demo_buffer,
    train_residual,
)
from robotrl.datasets import EpisodeStore


def _cfg() -> ResidualConfig:
    return ResidualConfig(**RESIDUAL_SETTINGS)  # small nets that learn the toy task


def _feat():
    return StateFeaturizer(["state/pos", "state/goal"], STATE_STATS)


@pytest.mark.slow
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
    res = train_residual(base, PointGoal, _feat(), _cfg(), train, execute_horizon=1, progress=False)
    first, last = res.evaluations[0], res.evaluations[-1]
    assert first["success_rate"] <= 0.3  # the base alone
    assert last["success_rate"] >= 0.9, res.evaluations
    # The learned residual leans against the bias (0.5, -0.5).
    assert last["residual_mean_0"] < -0.2 and last["residual_mean_1"] > 0.2


@pytest.mark.slow
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
        _cfg(),
        train,
        execute_horizon=1,
        intervener=human,
        progress=False,
    )
    rates = [e["intervention_rate"] for e in res.episodes]
    assert res.env_steps == 300 and len(calls) == 300
    assert 0.25 < np.mean(rates) < 0.4


def test_demo_transitions_are_flagged_for_imitation_and_online_ones_are_not(tmp_path):
    store = EpisodeStore.create(tmp_path / "d.zarr", fps=20.0, robot="toy")
    with store.begin_episode(task="toy") as w:
        for t in range(4):
            pos, goal = np.full(2, 0.1 * t, np.float32), np.ones(2, np.float32)
            obs = {"state/pos": pos, "state/goal": goal}
            w.add(obs, np.array([0.5, 0.5], np.float32), reward=float(t == 3))
        w.commit(success=True, terminated=True, final_obs=obs)
    cfg = _cfg()
    demos = demo_buffer(store, BiasedPointBase(bias=(0.5, -0.5)), _feat(), cfg)
    store.close()
    assert len(demos) == 4
    np.testing.assert_array_equal(demos.obs["demo"][:4], 1.0)
    np.testing.assert_array_equal(demos.obs["human"][:4], 0.0)
    np.testing.assert_array_equal(demos.next_obs["demo"][:4], 0.0)
    buffers = ResidualReplay(_feat().dim, 2, cfg, 100, demos=demos)
    t = ResidualTransition(
        env_id=0,
        features=np.zeros(4, np.float32),
        base_action=np.zeros(2, np.float32),
        action=np.ones(2, np.float32),
        reward=0.0,
        next_features=np.zeros(4, np.float32),
        next_base_action=np.zeros(2, np.float32),
        terminated=False,
        truncated=False,
        intervention=True,
    )
    buffers.store(t)
    assert buffers.online.obs["demo"][0] == 0.0 and buffers.online.obs["human"][0] == 1.0
    assert buffers.hil.obs["demo"][0] == 0.0


def test_a_budget_that_ends_in_warm_up_is_refused_before_any_env_step():
    made = []

    def make_env():
        made.append(1)
        return PointGoal()

    train = TrainConfig(total_steps=1000, warmup_steps=1000, eval_every=2000)
    with pytest.raises(ValueError) as err:
        train_residual(BiasedPointBase(), make_env, _feat(), _cfg(), train, progress=False)
    msg = str(err.value)
    assert "total_steps=1000" in msg and "warmup_steps=1000" in msg
    assert "e.g. total_steps=2000" in msg
    assert made == []  # neither the rollout envs nor the base evaluation ran


def test_progress_bar_counts_env_steps_and_shows_each_phase(monkeypatch):
    import robotrl.algos.residual_training as rt

    monkeypatch.setattr(rt, "tqdm", RecordingBar)
    train = TrainConfig(
        total_steps=40,
        warmup_steps=20,
        critic_warmup_updates=120,
        eval_every=30,
        eval_episodes=1,
    )
    cfg = ResidualConfig(**{**RESIDUAL_SETTINGS, "hidden": 16, "ensemble": 2, "batch_size": 16})
    res = train_residual(BiasedPointBase(), PointGoal, _feat(), cfg, train, execute_horizon=1)
    bar = RecordingBar.last
    assert bar.steps == [1] * 40 and bar.n == 40
    assert bar.phases == [
        "warm-up",
        "eval",  # the base at step 0
        "warm-up",
        "critic warm-up 0/120",
        "critic warm-up 50/120",
        "critic warm-up 100/120",
        "train",
        "eval",  # at step 30
        "train",
    ]
    assert bar.postfix.endswith(f"success={res.evaluations[-1]['success_rate']:.2f}")


# the rule itself: tests/test_kept_agent.py; here, that the loop hands it every evaluation
@pytest.mark.parametrize(
    ("rates", "keep_best", "kept"),
    [
        ([0.2, 0.5, 0.3, 0.5, 0.1], True, 3),  # the latest of the best evaluations
        ([0.5, 0.2, 0.1, 0.4, 0.3], True, 0),  # nothing beat the base: the zero residual
        ([0.2, 0.5, 0.3, 0.5, 0.1], False, 4),  # the last agent
    ],
)
def test_the_agent_kept_is_the_one_of_the_best_evaluation(monkeypatch, rates, keep_best, kept):
    import robotrl.algos.residual_training as rt

    seen, scores = [], iter(rates)

    def scripted_evaluation(agent, *args, **kwargs):
        seen.append({k: v.clone() for k, v in agent.state_dict().items()})
        return {"success_rate": next(scores)}

    monkeypatch.setattr(rt, "evaluate_residual", scripted_evaluation)
    train = TrainConfig(
        total_steps=200, warmup_steps=20, critic_warmup_updates=5, eval_every=50,
        eval_episodes=1, keep_best=keep_best,
    )  # fmt: skip
    res = train_residual(
        BiasedPointBase(), PointGoal, _feat(), _cfg(), train, execute_horizon=1, progress=False
    )
    assert len(seen) == 5 and res.kept_step == 50 * kept
    final = res.agent.state_dict()
    for k, v in seen[kept].items():
        np.testing.assert_array_equal(final[k].numpy(), v.numpy())
    if kept == 0:  # the base: the actor's last layer is still zero
        np.testing.assert_array_equal(res.agent.actor[-1].weight.detach().numpy(), 0.0)
    else:
        last = [k for k in final if k.startswith("actor.") and k.endswith("weight")][-1]
        assert not np.array_equal(final[last].numpy(), seen[0][last].numpy())
