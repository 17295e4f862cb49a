"""The two-process demo: the toy learner learns, and learning still converges when the learner
is SIGKILLed and restarted mid-run, with exact transition accounting."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("zmq", reason="robotrl.distributed needs the 'dist' extra (pyzmq)")

from bandit_demo import BanditActor, BanditLearner, ReachBandit, demo

from robotrl.distributed.transitions import decode_batch, encode_arrays, flatten_transition, stack


def test_reward_model_recovers_the_optimal_gain_in_process():
    env, actor, learner = ReachBandit(seed=0), BanditActor(seed=0), BanditLearner(seed=0)
    rows = []
    for _ in range(512):
        obs = env.reset()
        action = actor.act(obs)
        nxt, reward, term, trunc, _ = env.step(action)
        rows.append(flatten_transition(obs, action, reward, nxt, term, trunc))
    learner.on_transitions(decode_batch(encode_arrays(stack(rows))))
    start = env.regret(actor.w)
    for _ in range(6000):
        learner.update()
    actor.load_state_dict(learner.state_dict())
    assert env.regret(actor.w) < 1e-2 * start
    # at the optimum the reward model is exact: M = W*, Q = -W*^T W*, b = 0
    q = learner.theta[8:24].reshape(4, 4)
    np.testing.assert_allclose(q, -env.w_star.T @ env.w_star, atol=1e-2)


@pytest.mark.slow
def test_learning_converges_across_a_learner_kill_and_restart():
    out = demo(duration=8.0, kill_at=1.5, down=1.5, outbox_batches=8, batch_size=16)
    a = out["actor"]
    print(out)  # shown on failure
    assert out["accounting_exact"] and a["flushed"]
    assert a["sent"] == out["delivered_unique"] + a["dropped"] + a["rejected"]
    assert a["dropped"] > 0 and a["reconnects"] >= 1  # the outage overflowed the outbox
    assert out["regret_before_kill"] is not None and out["regret_at_restart"] is not None
    assert out["resumed_version"] > 0  # resumed from its checkpoint
    assert out["final_version"] > out["resumed_version"]
    assert out["regret_end"] < 0.5 * out["regret_before_kill"]
    assert out["regret_end"] < 0.1 * out["regret_start"]
