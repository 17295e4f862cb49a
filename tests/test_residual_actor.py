"""The residual actor: never stalls on a dead learner, acts with base + noise until weights
arrive, then with the newest weights (versions increase), and every transition is accounted."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import ray_learner
import toy
from ray_learner import served
from toy import STATE_STATS, BiasedPointBase, PointGoal

from robotrl.algos.residual import ResidualAgent, ResidualConfig, StateFeaturizer
from robotrl.algos.residual_actor import ResidualActor, run_actor
from robotrl.algos.residual_learner import ResidualLearner
from robotrl.algos.residual_rollout import ResidualRollout
from robotrl.algos.residual_training import TrainConfig
from robotrl.distributed import ActorClient
from robotrl.distributed.cluster import connect

CFG = ResidualConfig(scale=0.5, hidden=32, ensemble=2, batch_size=32, utd=1)


def _feat():
    return StateFeaturizer(["state/pos", "state/goal"], STATE_STATS)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray = pytest.importorskip("ray", reason="robotrl.distributed needs the 'dist' extra (ray)")
    for module in (ray_learner, toy):  # the workers do not see tests/
        ray.cloudpickle.register_pickle_by_value(module)
    connect(None)
    yield
    ray.shutdown()


def test_actor_never_stalls_on_a_dead_learner_and_counts_its_transitions():
    train = TrainConfig(total_steps=400, warmup_noise=0.05, eval_every=10_000)
    rollout = ResidualRollout(BiasedPointBase(), PointGoal, _feat(), execute_horizon=1)
    agent = ResidualAgent(4, 2, CFG)
    client = ActorClient("lonely", "nobody", batch_size=8, outbox_batches=6, max_in_flight=2)
    try:
        out = run_actor(client, rollout, agent, train, flush_timeout=0.5)
    finally:
        client.close()
    assert out["env_steps"] == 400 and out["weights_version"] == -1 and not out["flushed"]
    assert out["acked"] == 0 and out["dropped"] > 0  # the outbox overflowed, counted
    # every completed transition is sent: one per env step but the last (awaits a_b')
    assert out["sent"] == 399


def test_load_state_dict_checks_names_and_shapes():
    actor = ResidualActor(ResidualAgent(4, 2, CFG))
    good = {k: v.numpy() for k, v in actor.agent.actor.state_dict().items()}
    actor.load_state_dict(good)
    assert actor.loaded
    bigger = ResidualAgent(4, 2, ResidualConfig(hidden=64, ensemble=2)).actor.state_dict()
    with pytest.raises(ValueError, match="do not fit"):
        actor.load_state_dict({k: v.numpy() for k, v in bigger.items()})


@pytest.mark.slow
def test_weights_reach_the_actor_with_increasing_versions(tmp_path):
    train = TrainConfig(
        total_steps=600, warmup_steps=100, critic_warmup_updates=20, eval_every=150, eval_episodes=2
    )

    def make_learner():
        return ResidualLearner(ResidualAgent(4, 2, CFG), train)

    rollout = ResidualRollout(BiasedPointBase(), PointGoal, _feat(), execute_horizon=1)
    agent = ResidualAgent(4, 2, CFG, seed=1)

    def evaluate(a):
        return {
            "success_rate": 0.0,
            "residual_norm": float(a.actor[-1].weight.detach().abs().sum()),
        }

    with served(make_learner, "l-residual", tmp_path, publish_every_updates=10,
                publish_every_s=0.2) as box:  # fmt: skip
        client = ActorClient("robot0", "l-residual", batch_size=8)
        try:
            out = run_actor(
                client, rollout, agent, train, actor_hz=300.0, evaluate=evaluate, settle_s=60.0
            )
        finally:
            client.close()
    result = box["out"]
    # The last evaluation came after the learner ran every update it owed (a loaded CPU may
    # not have published anything during the 2 s of acting).
    assert out["settled"]
    versions = [e["version"] for e in out["evaluations"]]
    assert versions[0] == -1 and versions[-1] > 1, versions
    assert all(b >= a for a, b in itertools.pairwise(versions)), versions
    assert out["evaluations"][-1]["residual_norm"] > 0  # the zero-init last layer was replaced
    assert out["flushed"] and out["sent"] == out["acked"] == result["received"]
    assert result["version"] >= versions[-1] and (tmp_path / "latest").is_file()
    np.testing.assert_equal(out["dropped"], 0)
