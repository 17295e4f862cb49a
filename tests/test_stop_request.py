"""robotrl.stop_request: the first Ctrl-C / SIGTERM asks a job to stop, the second quits; the
handlers come back afterwards (the training loops and commands that honour it: their own test
modules)."""

import os
import signal
import threading

import pytest

from robotrl.stop_request import INTERRUPTED, stop_notice, stop_request, stop_summary


def test_the_first_sigint_sets_the_event_and_prints_the_notice(capsys):
    with stop_request("job: stopping") as stop:
        assert not stop.is_set()
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt inside the block
        assert stop.is_set()
    assert capsys.readouterr().err == "job: stopping\n"


def test_a_second_sigint_quits_at_once():
    with pytest.raises(KeyboardInterrupt), stop_request() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.is_set()
        os.kill(os.getpid(), signal.SIGINT)


def test_sigterm_sets_the_event_as_often_as_it_comes(capsys):
    with stop_request("job: stopping") as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.is_set()
    assert capsys.readouterr().err == "job: stopping\n"  # printed once


def test_the_previous_handlers_come_back():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(RuntimeError), stop_request():
        assert signal.getsignal(signal.SIGINT) is not before[signal.SIGINT]
        raise RuntimeError("the job failed")
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_off_the_main_thread_it_installs_nothing():
    seen = []

    def job():
        with stop_request() as stop:
            seen.append((stop.is_set(), signal.getsignal(signal.SIGINT)))

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=job)
    thread.start()
    thread.join()
    assert seen == [(False, before)]


def test_the_summary_and_the_notice():
    assert stop_summary(False) == {"interrupted": False}
    assert (
        stop_summary(True)
        == {"interrupted": True, "exit_code": INTERRUPTED}
        == {
            "interrupted": True,
            "exit_code": 130,
        }
    )
    line = stop_notice("robotrl train-bc", "the checkpoint keeps the last step")
    assert line.startswith("robotrl train-bc: stopping") and "Ctrl-C again" in line
