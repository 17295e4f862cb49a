"""Split residual RL in real processes: the learner is SIGKILLed and restarted mid-run (and the
actor once), learning still lifts the biased base, and every transition of the surviving actor
is delivered or counted as dropped."""

from __future__ import annotations

import pytest

pytest.importorskip("zmq", reason="robotrl.distributed needs the 'dist' extra (pyzmq)")

from residual_demo import run


@pytest.mark.slow
def test_learning_survives_a_learner_kill_and_an_actor_kill():
    out = run(
        total_steps=3000,
        hz=25.0,
        kill_actor_at=250,
        kill_learner_at=600,
        down=1.0,
        outbox_batches=8,
        timeout=300.0,
    )
    print({k: v for k, v in out.items() if k != "curve"})  # shown on failure
    a = out["surviving_actor"]
    assert out["learner_killed_rc"] == -9 and a["flushed"] and a["env_steps"] == 3000
    assert out["accounting_exact"]
    assert a["sent"] == out["surviving_actor_delivered"] + a["dropped"] + a["rejected"]
    assert a["reconnects"] >= 1 and a["rejected"] == 0
    assert out["resumed_version"] > 0 and out["final_version"] > out["resumed_version"]
    assert out["killed_actor"]["delivered"] > 0
    assert out["base_success"] <= 0.3
    # Learning is measured after the learner came back (a restarted learner has lost its
    # replay and warms up again). At 25 Hz the learner keeps up with UTD 2 (at 40-50 Hz on a
    # loaded CPU it lagged and the run ended at 30-43 %); the actor's last evaluation also waits
    # until the learner has run every update the transitions paid for. With the residual's L2
    # penalty on (this bias needs residuals at the scale bound) two runs ended at 13 and 37 %;
    # without it at 100 %. This asserts a clear gain; bench/residual_actor_learner.py has the curve.
    assert a["settled"], "the learner did not catch up within SETTLE_S"
    assert out["final_success"] >= out["base_success"] + 0.2, out["curve"]
    assert a["step_ms_max"] < 250  # the control loop never waited on the dead learner
