"""Inference workers: one job at a time off the control thread, real or simulated time."""

import threading

import pytest

from robotrl.inference_worker import InferenceWorker, SimulatedTimeWorker


def test_real_time_worker_runs_a_job_and_poll_never_blocks():
    release = threading.Event()
    worker = InferenceWorker()
    worker.submit(lambda: (release.wait(5), 42)[1], tick=3)
    assert worker.busy and worker.poll(3) is None  # still running: no result, no wait
    with pytest.raises(RuntimeError, match="already running"):
        worker.submit(lambda: 0, tick=4)
    release.set()
    assert worker.wait_result(5)
    res = worker.poll(5)
    assert res is not None and res.value == 42 and res.error is None and res.submit_tick == 3
    assert not worker.busy and worker.poll(6) is None
    assert worker.close()
    with pytest.raises(RuntimeError, match="closed"):
        worker.submit(lambda: 0, tick=7)


def test_a_failing_job_returns_its_exception_as_data():
    worker = InferenceWorker()
    worker.submit(lambda: 1 / 0, tick=0)
    assert worker.wait_result(5)
    res = worker.poll(1)
    assert res is not None and isinstance(res.error, ZeroDivisionError) and res.value is None
    assert worker.close()


def test_simulated_worker_shows_a_result_exactly_d_ticks_after_the_request():
    worker = SimulatedTimeWorker(delay_ticks=3)
    worker.submit(lambda: "chunk", tick=10)
    assert worker.poll(11) is None and worker.poll(12) is None
    res = worker.poll(13)
    assert res is not None and res.value == "chunk"
    assert worker.close()


def test_simulated_worker_delay_from_compute_time():
    worker = SimulatedTimeWorker(control_hz=20.0, extra_delay_s=0.12)
    worker.submit(lambda: None, tick=0)  # ~0 s compute + 0.12 s -> ceil(2.4) = 3 ticks
    assert worker.poll(2) is None
    res = worker.poll(3)
    assert res is not None and worker.delay_of(res) == 3
    assert worker.close()


def test_simulated_worker_configuration_errors():
    with pytest.raises(ValueError, match="exactly one"):
        SimulatedTimeWorker()
    with pytest.raises(ValueError, match="exactly one"):
        SimulatedTimeWorker(delay_ticks=2, control_hz=20.0)
    with pytest.raises(ValueError, match=">= 1"):
        SimulatedTimeWorker(delay_ticks=0)
    with pytest.raises(ValueError, match="> 0"):
        SimulatedTimeWorker(control_hz=0.0)
