"""The residual learner: stream reassembly (gaps never join n-step returns), the warm-up / UTD
schedule, and checkpoint + resume."""

from __future__ import annotations

import numpy as np
import pytest

from robotrl.algos.residual import ResidualAgent, ResidualConfig
from robotrl.algos.residual_learner import ResidualLearner
from robotrl.algos.residual_training import TrainConfig
from robotrl.distributed.transitions import TransitionBatch, flatten_transition, stack

CFG = ResidualConfig(hidden=16, ensemble=2, batch_size=8, utd=2, n_step=3)


def _learner(warmup=10, critic_warmup=3, **kw) -> ResidualLearner:
    train = TrainConfig(warmup_steps=warmup, critic_warmup_updates=critic_warmup, buffer_size=100)
    return ResidualLearner(ResidualAgent(4, 2, CFG, seed=0), train, **kw)


def _batch(ts, *, env_id=0, epoch=1, done_at=(), human_at=(), actor="a") -> TransitionBatch:
    rows = []
    for t in ts:
        o = {"features": np.full(4, t, np.float32), "base_action": np.zeros(2, np.float32)}
        o2 = {"features": np.full(4, t + 1, np.float32), "base_action": np.zeros(2, np.float32)}
        extras = {"intervention": np.bool_(t in human_at), "t": np.int64(t)}
        rows.append(
            flatten_transition(
                o, np.zeros(2, np.float32), float(t), o2, t in done_at, False, env_id, extras
            )
        )
    b = TransitionBatch(stack(rows))
    b.actor_id, b.epoch = actor, epoch
    return b


def _stored(learner):
    n = len(learner.online)
    return learner.online.reward[:n].tolist(), learner.online.truncated[:n].tolist()


def test_transitions_are_stored_once_their_successor_arrives():
    ln = _learner()
    ln.on_transitions(_batch([0, 1, 2]))
    assert _stored(ln) == ([0.0, 1.0], [False, False])  # 2 is held until 3 arrives
    ln.on_transitions(_batch([3, 4], done_at=(4,), human_at=(3,)))
    assert _stored(ln) == ([0.0, 1.0, 2.0, 3.0, 4.0], [False] * 5)
    assert ln.online.terminated[4] and len(ln.buffers.hil) == 1 and ln.cut == 0
    # the n-step chain runs 0 -> 1 -> 2 within the episode
    assert ln.online.gather(np.array([0]))["n"][0] == 3


def test_a_gap_or_a_new_epoch_cuts_the_chain_as_a_truncation():
    ln = _learner()
    ln.on_transitions(_batch([0, 1, 2]))
    ln.on_transitions(_batch([7, 8]))  # 3..6 lost (outbox overflow)
    rewards, truncated = _stored(ln)
    assert rewards == [0.0, 1.0, 2.0, 7.0] and truncated == [False, False, True, False]
    assert ln.cut == 1
    assert ln.online.gather(np.array([1]))["n"][0] == 2  # 1 -> 2, not across the gap
    ln.on_transitions(_batch([0, 1], epoch=2))  # the actor restarted
    rewards, truncated = _stored(ln)
    assert rewards[-2:] == [8.0, 0.0] and truncated[-2:] == [True, False] and ln.cut == 2
    ln.on_transitions(_batch([0, 1], env_id=3, actor="b"))  # another stream, no cut
    assert ln.cut == 2 and len(ln._streams) == 2


def test_too_many_streams_is_an_error():
    ln = _learner(max_streams=1)
    ln.on_transitions(_batch([0]))
    with pytest.raises(ValueError, match="max_streams"):
        ln.on_transitions(_batch([0], env_id=1))


def test_schedule_warmup_then_critic_warmup_then_utd():
    ln = _learner(warmup=10, critic_warmup=3)
    ln.on_transitions(_batch(range(9)))
    assert not ln.has_work() and ln.work() == 0 and not ln.ready
    ln.on_transitions(_batch([9]))
    assert ln.work(max_updates=2) == 2 and not ln.ready  # critic-only warm-up, in slices
    assert ln.work() == 1 and ln.ready and ln.agent.updates == 3
    assert ln.work() == 0  # nothing owed yet
    ln.on_transitions(_batch([10, 11, 12]))
    assert ln.owed == 6 and ln.work(max_updates=4) == 4 and ln.work() == 2
    assert ln.agent.updates == 9 and not ln.has_work()


def test_checkpoint_resume_restores_weights_counts_and_gates_updates(tmp_path):
    ln = _learner(warmup=5, critic_warmup=2)
    ln.on_transitions(_batch(range(12)))
    while ln.work():
        pass
    ln.save(tmp_path, version=7, meta={"task": "toy"})
    ln.agent.updates += 1
    ln.save(tmp_path, version=8, meta={"task": "toy"})
    assert len(list(tmp_path.glob("ckpt-*"))) == 1  # older checkpoints removed

    fresh = _learner(warmup=5, critic_warmup=2, refill_steps=4)
    assert fresh.resume(tmp_path / "missing") is None
    assert fresh.resume(tmp_path) == 8
    for k, v in ln.agent.state_dict().items():
        np.testing.assert_array_equal(fresh.agent.state_dict()[k].numpy(), v.numpy())
    assert fresh.ready and fresh.agent.updates == ln.agent.updates and fresh.received == 12
    fresh.on_transitions(_batch([0, 1, 2], epoch=9))
    assert fresh.work() == 0  # refilling: 3 < 4 fresh transitions
    fresh.on_transitions(_batch([3, 4], epoch=9))
    assert fresh.work() == 4  # the 4th and 5th owe utd = 2 updates each
