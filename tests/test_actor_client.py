"""ActorClient against a LearnerService Ray actor on a local Ray instance: delivery in order,
weights through the object store, a control loop that never waits on a missing learner, bad
input, refusals, and a learner SIGKILL that Ray restarts, with exact accounting."""

from __future__ import annotations

import os
import signal
import sys
import threading

import numpy as np
import pytest
import ray_learner
from ray_learner import Collect, DeliveryLog, served

from robotrl.distributed import ActorClient, SchemaError
from robotrl.distributed.cluster import connect

ray = pytest.importorskip("ray", reason="robotrl.distributed needs the 'dist' extra (ray)")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.cloudpickle.register_pickle_by_value(ray_learner)  # the workers do not see tests/
    connect(None)
    yield
    ray.shutdown()


def _add(client: ActorClient, i: int, shape: tuple[int, ...] = (3,)) -> None:
    x = np.full(shape, i, np.float32)
    client.add({"x": x}, np.zeros(2, np.float32), float(i), {"x": x + 1}, False, False)


def test_transitions_arrive_in_order_and_weights_with_increasing_versions(tmp_path):
    log = DeliveryLog(tmp_path / "log.jsonl")
    with served(Collect, "l-order", tmp_path / "s", on_delivery=log, publish_every_updates=0,
                publish_every_s=0.05):  # fmt: skip
        with ActorClient("robot0", "l-order", batch_size=7) as client:
            for i in range(50):
                _add(client, i)
            assert client.flush(timeout=60)
            s = client.stats()
            first = client.wait_weights(0, timeout=30)
            for i in range(50, 60):
                _add(client, i)
            assert client.flush(timeout=60)
            # the learner publishes whenever it got something new: its weights count it
            later = client.wait_weights(first.version + 1, timeout=30)
    assert (s.sent, s.acked, s.dropped, s.pending) == (50, 50, 0, 0)
    rows = sorted(log.unique().values(), key=lambda r: r["s"])
    assert [r["s"] for r in rows] == list(range(10))  # ceil(50 / 7), then the last 10
    assert [x for r in rows for x in r["x"]] == list(range(60))
    assert rows[0]["a"] == "robot0" and rows[0]["e"] == client.epoch
    assert first is not None and later is not None and later.session == first.session
    assert later.version > first.version and later.state_dict["w"][0] >= 50


def test_the_control_loop_never_waits_while_no_learner_exists(tmp_path):
    client = ActorClient("robot0", "l-late", batch_size=4, outbox_batches=8, max_in_flight=2)
    try:
        for i in range(100):  # no learner of that name yet: add() only queues
            _add(client, i)
            assert client.poll_weights() is None
        assert client.flush(timeout=0.5) is False and not client.connected
        s = client.stats()
        assert s.sent == 100 == s.dropped + s.pending and s.dropped > 0 and s.acked == 0
        log = DeliveryLog(tmp_path / "log.jsonl")
        with served(Collect, "l-late", tmp_path / "s", on_delivery=log):
            assert client.flush(timeout=60)
            s = client.stats()
            assert client.connected
    finally:
        client.close()
    delivered = sum(r["n"] for r in log.unique().values())
    assert s.sent == delivered + s.dropped and s.pending == 0


def test_bad_input_raises_and_is_not_counted():
    with ActorClient("robot0", "l-none") as client:
        with pytest.raises(TypeError, match="must be a numpy array, got list"):
            client.add({"x": [1.0]}, np.zeros(2), 0.0, {"x": [1.0]}, False, False)
        _add(client, 0)
        with pytest.raises(SchemaError, match=r"expected shape \(3,\)"):
            _add(client, 1, shape=(4,))
        assert client.stats().sent == 1
    with pytest.raises(RuntimeError, match="closed"):
        _add(client, 2)
    with pytest.raises(ValueError, match="batch_size"):
        ActorClient("robot0", batch_size=0)
    with pytest.raises(ValueError, match="actor_id"):
        ActorClient("robot 0")


def test_a_schema_the_learner_does_not_take_is_counted_as_rejected(tmp_path):
    x3 = np.zeros(3, np.float32)
    with served(Collect, "l-schema", tmp_path / "s"):
        with ActorClient("a", "l-schema", batch_size=2) as a:
            for _ in range(2):
                a.add({"x": x3}, x3, 0.0, {"x": x3}, False, False)
            assert a.flush(timeout=60)
        with ActorClient("b", "l-schema", batch_size=2) as b:
            x4 = np.zeros(4, np.float32)
            for _ in range(3):
                b.add({"x": x4}, x3, 0.0, {"x": x4}, False, False)
            assert b.flush(timeout=60)
            s = b.stats()
    assert (s.sent, s.acked, s.rejected, s.dropped) == (3, 0, 3, 0)
    assert "expected shape (3,)" in s.last_error


def test_close_releases_the_thread():
    threads = threading.active_count()
    for _ in range(3):
        client = ActorClient("robot0", "l-none")
        _add(client, 0)
        client.close()
        client.close()  # idempotent
    assert threading.active_count() == threads


def test_a_killed_learner_is_restarted_by_ray_and_nothing_is_lost_silently(tmp_path):
    """Transitions sent while the learner process is dead are delivered by the restarted one
    or counted as dropped: sent == delivered (unique) + dropped, exactly."""
    log = DeliveryLog(tmp_path / "log.jsonl")
    with served(Collect, "l-kill", tmp_path / "s", on_delivery=log) as box:
        client = ActorClient(
            "robot0", "l-kill", batch_size=10, outbox_batches=3, max_in_flight=1, ack_timeout=2.0
        )
        try:
            for i in range(200):
                _add(client, i)
            assert client.flush(timeout=60)
            pid = box["pid"]
            box["ready"].clear()
            os.kill(pid, signal.SIGKILL)  # no goodbye: whatever it held is gone
            for i in range(200, 400):  # a burst while it is dead: the outbox overflows
                _add(client, i)
            assert box["ready"].wait(120), "Ray did not restart the learner"
            assert box["pid"] != pid and box["restarted"]
            for i in range(400, 450):
                _add(client, i)
            assert client.flush(timeout=60)
            s = client.stats()
        finally:
            client.close()
    unique = log.unique()
    delivered = sum(r["n"] for r in unique.values())
    assert s.sent == 450 and s.dropped > 0 and s.rejected == 0
    assert s.sent == delivered + s.dropped and s.acked == delivered  # exact
    xs = sorted(x for r in unique.values() for x in r["x"])
    assert len(xs) == len(set(xs)) == delivered  # none twice
    assert any(200 <= x < 400 for x in xs)  # some of the burst arrived after the restart
    print(s, file=sys.stderr)
