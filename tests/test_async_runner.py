"""Real-time chunk execution: stalls only when the delay exceeds the lookahead, time-aligned and
blended chunks, fail-closed errors, clean shutdown. Simulated time makes every run exact."""

import threading

import numpy as np
import pytest
import torch

from policies.flow_matching import FlowMatchingPolicy
from robotrl.async_runner import AsyncChunkRunner, lookahead_for
from robotrl.inference_worker import InferenceWorker, SimulatedTimeWorker

DA = 3


class FakePolicy:
    """Chunks from the observed tick: ``plan="time"`` gives ``chunk[j] = tick + j`` (every chunk
    agrees on the trajectory a(t) = t), ``plan="const"`` gives chunk n filled with n."""

    obs_horizon, action_dim = 2, DA

    def __init__(self, ta=16, plan="time", fail_on=None, bad_on=None, gate=None):
        self.action_horizon = ta
        self.started = threading.Event()
        self.plan, self.fail_on, self.bad_on, self.gate = plan, fail_on, bad_on, gate
        self.calls = 0
        self.config = {"state_dims": {"state/t": 1}}

    def reset(self):
        pass

    def predict_chunk(self, obs):
        self.started.set()
        if self.gate is not None:
            self.gate.wait()
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("policy crashed")
        tick = float(obs["state/t"][0, -1, 0])
        if self.plan == "time":
            chunk = tick + np.arange(self.action_horizon, dtype=np.float64)
        else:
            chunk = np.full(self.action_horizon, float(self.calls))
        out = np.repeat(chunk[None, :, None], DA, axis=2)
        if self.calls == self.bad_on:
            out[0, 3, 0] = np.nan
        return torch.from_numpy(out)


def _run(runner, ticks, start=0):
    return np.stack([runner({"state/t": np.array([float(t)])}) for t in range(start, ticks)])


@pytest.mark.parametrize("delay", [1, 2, 3, 4])
def test_no_stalls_when_the_delay_fits_the_lookahead_and_actions_stay_time_aligned(delay):
    with AsyncChunkRunner(
        FakePolicy(), execute_horizon=8, lookahead=4, worker=SimulatedTimeWorker(delay)
    ) as r:
        acts = _run(r, 120)
    assert r.stats.stalls == 0
    assert r.stats.warmup_ticks == delay
    assert r.stats.delays == [delay] * len(r.stats.delays)
    assert r.stats.chunks >= 120 // 8
    # every executed action is the plan's action for its own tick: no stale index, and the
    # blend of two chunks that agree is that same action
    np.testing.assert_allclose(acts[delay:, 0], np.arange(delay, 120), atol=1e-5)


def test_stalls_are_counted_when_the_delay_exceeds_the_lookahead():
    d, delay = 2, 4
    with AsyncChunkRunner(
        FakePolicy(), execute_horizon=8, lookahead=d, worker=SimulatedTimeWorker(delay)
    ) as r:
        acts = _run(r, 100)
    # every switch after the first chunk comes delay - d ticks late
    assert r.stats.stalls == (delay - d) * (r.stats.chunks - 1) > 0
    assert r.stats.held_ticks == r.stats.warmup_ticks == delay
    # while stalled, the current chunk's own plan for those ticks is used (still time-aligned)
    np.testing.assert_allclose(acts[delay:, 0], np.arange(delay, 100), atol=1e-5)


def test_a_stall_past_the_chunk_end_holds_pose_and_keeps_the_gripper():
    # Ta 16, first chunk arrives at 12 -> window [12, 16); next request at 14 arrives at 26
    with AsyncChunkRunner(
        FakePolicy(), execute_horizon=8, lookahead=2, worker=SimulatedTimeWorker(12)
    ) as r:
        acts = _run(r, 27)
    np.testing.assert_allclose(acts[12:16, 0], np.arange(12, 16))
    held = acts[16:26]
    np.testing.assert_array_equal(held[:, :-1], 0.0)  # zero delta pose
    np.testing.assert_array_equal(held[:, -1], 15.0)  # gripper as last commanded
    assert r.stats.stalls == 10
    assert acts[26, 0] == pytest.approx(26.0)  # old chunk exhausted: nothing to blend with


def test_blend_weights_at_the_seam():
    # Ta 10, Te 4, d 2 -> b = 4; chunk n is constant n; delay 1
    with AsyncChunkRunner(
        FakePolicy(ta=10, plan="const"),
        execute_horizon=4,
        lookahead=2,
        worker=SimulatedTimeWorker(1),
    ) as r:
        acts = _run(r, 14)[:, 0]
    # tick 0 warm-up; chunk 1 runs ticks 1..4; chunk 2 (asked at 3) switches at 5
    assert acts[0] == 0.0
    np.testing.assert_allclose(acts[1:5], 1.0)
    w = np.arange(1, 5) / 5
    np.testing.assert_allclose(acts[5:9], (1 - w) * 1.0 + w * 2.0, atol=1e-6)
    assert acts[5] - acts[4] == pytest.approx(0.2)  # first new action: 1/(b+1) of the gap
    # chunk 3 was asked at tick 7 and switches at tick 9, after chunk 2's 4 actions
    np.testing.assert_allclose(acts[9:13], (1 - w) * 2.0 + w * 3.0, atol=1e-6)


def test_blend_steps_zero_switches_hard():
    with AsyncChunkRunner(
        FakePolicy(ta=10, plan="const"),
        execute_horizon=4,
        lookahead=2,
        blend_steps=0,
        worker=SimulatedTimeWorker(1),
    ) as r:
        acts = _run(r, 10)[:, 0]
    np.testing.assert_array_equal(acts[:9], [0, 1, 1, 1, 1, 2, 2, 2, 2])


@pytest.mark.parametrize("mode", ["raise", "nan"])
def test_policy_failure_fails_closed_and_is_surfaced(mode):
    seen = []
    kw = {"fail_on": 3} if mode == "raise" else {"bad_on": 3}
    r = AsyncChunkRunner(
        FakePolicy(**kw),
        execute_horizon=8,
        lookahead=4,
        worker=SimulatedTimeWorker(2),
        on_error=seen.append,
    )
    try:
        acts = _run(r, 60)
        # chunk 3 was requested at tick 14 (chunk 2 switched at 10, d = 4 before its end)
        # and its failure surfaces at tick 16: from there on only the hold action
        assert r.stats.errors == 1 and seen == [r.error]
        assert isinstance(r.error, RuntimeError if mode == "raise" else ValueError)
        np.testing.assert_allclose(acts[2:16, 0], np.arange(2, 16), atol=1e-5)
        np.testing.assert_array_equal(acts[16:, :-1], 0.0)
        np.testing.assert_array_equal(acts[16:, -1], 15.0)  # gripper of the last command
        assert r.stats.requests == 3  # no retry while failed
        # reset re-arms the runner
        r.reset()
        assert r.error is None
        acts = _run(r, 10)
        np.testing.assert_allclose(acts[2:, 0], np.arange(2, 10), atol=1e-5)
    finally:
        assert r.close()


def test_the_control_loop_never_waits_for_a_real_time_worker_and_shuts_down_cleanly():
    gate = threading.Event()
    policy = FakePolicy(gate=gate)
    r = AsyncChunkRunner(policy, execute_horizon=8, lookahead=4, initial_action=[0, 0, -1])
    thread = r.worker._thread
    # the policy is blocked: every tick still returns at once with the initial action
    acts = _run(r, 5)
    np.testing.assert_array_equal(acts, np.tile([0.0, 0.0, -1.0], (5, 1)))
    assert r.stats.warmup_ticks == 5 and r.stats.requests == 1
    gate.set()
    assert r.worker.wait_result(timeout=30)
    a = r({"state/t": np.array([5.0])})
    # the chunk asked at tick 0 is used at its index for tick 5
    assert a[0] == pytest.approx(5.0) and r.stats.delays == [5]
    assert r.close(timeout=30)
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        r({"state/t": np.array([6.0])})


def test_close_reports_a_policy_that_does_not_return_and_the_thread_still_ends():
    gate = threading.Event()
    policy = FakePolicy(gate=gate)
    r = AsyncChunkRunner(policy, execute_horizon=8, lookahead=4)
    _run(r, 2)
    assert policy.started.wait(30) and r.worker.busy
    assert not r.close(timeout=0.05)  # the policy is blocked on the gate: close says so
    with pytest.raises(RuntimeError, match="closed"):
        r({"state/t": np.array([2.0])})
    gate.set()  # the running job finishes, then the thread exits without taking new work
    r.worker._thread.join(30)
    assert not r.worker._thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        r.worker.submit(lambda: None, 3)


def test_a_result_requested_before_reset_is_discarded():
    r = AsyncChunkRunner(
        FakePolicy(), execute_horizon=8, lookahead=4, worker=SimulatedTimeWorker(3)
    )
    try:
        _run(r, 2)  # first request in flight (asked at tick 0, due at tick 3)
        r.reset()
        acts = _run(r, 112, start=100)
        assert r.stats.discarded == 1
        # time runs on: the old job shows up at tick 3 (this episode's second tick) and is
        # dropped; the new request goes out then and is used from tick 6, time-aligned
        assert r.stats.warmup_ticks == 2 + 4
        np.testing.assert_allclose(acts[4:, 0], np.arange(104, 112), atol=1e-5)
    finally:
        r.close()


def test_a_real_flow_policy_runs_through_the_worker_thread():
    torch.manual_seed(0)
    policy = FlowMatchingPolicy(
        {"state/x": 3}, action_dim=2, action_horizon=8, num_steps=2, hidden=16, obs_feature_dim=16
    ).eval()
    with AsyncChunkRunner(
        policy, execute_horizon=4, lookahead=2, worker=SimulatedTimeWorker(control_hz=20.0)
    ) as r:
        acts = np.stack([r({"state/x": np.full(3, float(t))}) for t in range(20)])
    assert acts.shape == (20, 2) and np.all(np.isfinite(acts)) and np.all(np.abs(acts) <= 1)
    assert r.stats.chunks >= 3 and r.stats.errors == 0


def test_configuration_errors_are_clear():
    with pytest.raises(ValueError, match="lookahead"):
        AsyncChunkRunner(FakePolicy(ta=8), execute_horizon=8, lookahead=1)
    with pytest.raises(ValueError, match="blend_steps"):
        AsyncChunkRunner(FakePolicy(ta=10), execute_horizon=4, lookahead=2, blend_steps=5)
    with pytest.raises(ValueError, match="exactly one"):
        SimulatedTimeWorker()
    with pytest.raises(ValueError, match=">= 1"):
        SimulatedTimeWorker(delay_ticks=0)
    r = AsyncChunkRunner(FakePolicy(), execute_horizon=8, lookahead=2)
    with pytest.raises(KeyError, match="state/t"):
        r({"state/other": np.zeros(1)})
    r.close()


def test_lookahead_for_rounds_the_latency_up_to_ticks():
    assert lookahead_for(0.12, 20.0, margin=0) == 3
    assert lookahead_for(0.1, 20.0, margin=1) == 3
    assert lookahead_for(0.0, 20.0, margin=0) == 0
    assert isinstance(InferenceWorker, type)


def test_a_vla_gets_the_newest_instruction_tokenised_at_each_request():
    from tiny_vla import tiny_vla

    vla = tiny_vla({"state/x": 3}, ["go left", "go right"], num_steps=2).eval()
    asked: list[list[int]] = []
    predict = vla.predict_chunk

    def spy(obs):
        asked.append(obs["language"][0].tolist())
        return predict(obs)

    vla.predict_chunk = spy  # type: ignore[method-assign]
    with AsyncChunkRunner(vla, execute_horizon=2, lookahead=1, worker=SimulatedTimeWorker(1)) as r:
        for t in range(8):
            text = "go left" if t < 4 else "go right"
            a = r({"state/x": np.full(3, float(t), np.float32), "language": text})
            assert a.shape == (2,) and np.isfinite(a).all()
        assert r.error is None and r.stats.requests >= 3
    left, right = (vla.tokenizer.encode_batch([t])[0][0].tolist() for t in ("go left", "go right"))
    assert asked[0] == left and asked[-1] == right
