"""ActorClient against a LearnerServer on loopback: delivery, weights, deadlines, learner
SIGKILL + restart (exact accounting), clean shutdown."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

pytest.importorskip("zmq", reason="robotrl.distributed needs the 'dist' extra (pyzmq)")

from dist_procs import LEARNER, read_deliveries, start, wait_until

from robotrl.distributed import ActorClient, LearnerServer, SchemaError

FAST = dict(heartbeat_interval=0.05, peer_timeout=0.5)


class Collect:
    """A Learner that keeps every batch; weights = whatever the test sets."""

    def __init__(self) -> None:
        self.batches: list = []
        self.weights = {"w": np.zeros(3, np.float32)}

    def on_transitions(self, batch) -> None:
        self.batches.append(batch)

    def state_dict(self) -> dict:
        return self.weights


def _add(client: ActorClient, i: int, shape: tuple[int, ...] = (3,)) -> None:
    x = np.full(shape, i, np.float32)
    client.add({"x": x}, np.zeros(2, np.float32), float(i), {"x": x + 1}, False, False)


def _serve_until(server: LearnerServer, n: int) -> None:
    wait_until(lambda: server.deliver(timeout=0.01) >= 0 and server.stats().delivered >= n)


def _free_address() -> str:
    with LearnerServer(Collect(), "tcp://127.0.0.1:*") as s:
        return s.address  # nothing listens there any more


def test_transitions_arrive_bitwise_in_order():
    learner, rng = Collect(), np.random.default_rng(0)
    sent = []
    with LearnerServer(learner, "tcp://127.0.0.1:*", **FAST) as server:
        with ActorClient(server.address, "robot0", batch_size=7, **FAST) as client:
            for i in range(50):
                obs = {
                    "img": rng.integers(0, 256, (4, 5, 3), dtype=np.uint8),
                    "q": rng.normal(size=7),
                }
                nxt = {"img": obs["img"][::-1].copy(), "q": rng.normal(size=7)}
                act = rng.uniform(-1, 1, 2).astype(np.float32)
                client.add(
                    obs,
                    act,
                    float(rng.normal()),
                    nxt,
                    i % 10 == 9,
                    False,
                    env_id=i % 2,
                    extras={"intervention": np.bool_(i % 4 == 0)},
                )
                sent.append((obs, act, nxt))
            _serve_until(server, 50)
            assert client.flush(timeout=10)
            s = client.stats()
    assert (s.sent, s.acked, s.dropped, s.pending) == (50, 50, 0, 0)
    assert [b.seq for b in learner.batches] == list(range(8))  # ceil(50 / 7), in order
    rows = [r for b in learner.batches for r in b.rows()]
    for (obs, act, nxt), row in zip(sent, rows, strict=True):
        for k in obs:
            assert row["obs"][k].dtype == obs[k].dtype and row["obs"][k].shape == obs[k].shape
            assert row["obs"][k].tobytes() == obs[k].tobytes()
            assert row["next_obs"][k].tobytes() == nxt[k].tobytes()
        assert row["action"].tobytes() == act.tobytes()
    assert learner.batches[0].actor_id == "robot0"
    intervention = np.concatenate([b.extras["intervention"] for b in learner.batches])
    np.testing.assert_array_equal(intervention, np.arange(50) % 4 == 0)


def test_weight_broadcast_reaches_actor_with_increasing_versions():
    learner = Collect()
    with LearnerServer(learner, "tcp://127.0.0.1:*", **FAST) as server:
        with ActorClient(server.address, "robot0", **FAST) as client:
            seen = []

            def newest_is(version: int) -> bool:
                w = client.poll_weights()
                if w is not None:
                    seen.append(w)
                return bool(seen) and seen[-1].version == version

            for v in range(1, 6):
                learner.weights = {"w": np.full(3, v, np.float32)}
                assert server.publish() == v
                wait_until(lambda v=v: newest_is(v))
            versions = [w.version for w in seen]
            assert versions == sorted(set(versions)) and versions[-1] == 5
            np.testing.assert_array_equal(seen[-1].state_dict["w"], np.full(3, 5, np.float32))
            assert seen[-1].session == server.session
            assert client.poll_weights() is None  # nothing new
            wait_until(lambda: server.actors()["robot0"].weights_version == 5)  # via pings


def test_published_every_n_updates():
    with LearnerServer(
        Collect(), "tcp://127.0.0.1:*", publish_every_updates=3, publish_every_s=1e9
    ) as server:
        versions = [server.updated() for _ in range(7)]
    assert versions == [None, None, 1, None, None, 2, None]


def test_calls_never_block_while_the_learner_is_gone():
    address = _free_address()
    client = ActorClient(address, "robot0", batch_size=4, outbox_batches=8, max_in_flight=2, **FAST)
    worst = 0.0
    t_end = time.monotonic() + 1.5  # spans several peer timeouts / reconnect cycles
    i = 0
    while time.monotonic() < t_end:
        t0 = time.perf_counter()
        _add(client, i)
        client.poll_weights()
        client.stats()
        worst = max(worst, time.perf_counter() - t0)
        i += 1
        time.sleep(0.001)
    t0 = time.monotonic()
    assert client.flush(timeout=0.2) is False  # bounded by its own timeout
    assert time.monotonic() - t0 < 1.0
    s = client.stats()
    # A blocking call would take a peer timeout (0.5 s); these do no I/O at all. The bound
    # leaves room for a loaded machine's scheduling.
    assert worst < 0.1, worst
    assert not s.connected and s.acked == 0
    assert s.sent == i == s.dropped + s.pending and s.dropped > 0
    t0 = time.monotonic()
    client.close()
    assert time.monotonic() - t0 < 2.0


def test_bad_input_raises_and_is_not_counted():
    with ActorClient("tcp://127.0.0.1:9", "robot0", **FAST) as client:
        with pytest.raises(TypeError, match="must be a numpy array, got list"):
            client.add({"x": [1.0]}, np.zeros(2), 0.0, {"x": [1.0]}, False, False)
        _add(client, 0)
        with pytest.raises(SchemaError, match=r"expected shape \(3,\)"):
            _add(client, 1, shape=(4,))
        assert client.stats().sent == 1
    with pytest.raises(RuntimeError, match="closed"):
        _add(client, 2)
    for bad in [dict(batch_size=0), dict(heartbeat_interval=1.0, peer_timeout=0.5)]:
        with pytest.raises(ValueError):
            ActorClient("tcp://127.0.0.1:9", "robot0", **bad)
    with pytest.raises(ValueError, match="names every interface"):
        LearnerServer(Collect(), "tcp://0.0.0.0:5555")


def test_learner_schema_mismatch_is_counted_as_rejected():
    x3 = np.zeros(3, np.float32)
    with LearnerServer(Collect(), "tcp://127.0.0.1:*", **FAST) as server:
        with ActorClient(server.address, "a", batch_size=2, **FAST) as a:
            for _ in range(2):
                a.add({"x": x3}, x3, 0.0, {"x": x3}, False, False)
            _serve_until(server, 2)
            assert a.flush(timeout=10)
        with ActorClient(server.address, "b", batch_size=2, **FAST) as b:
            x4 = np.zeros(4, np.float32)
            for _ in range(3):
                b.add({"x": x4}, x3, 0.0, {"x": x4}, False, False)
            assert b.flush(timeout=10)
            s = b.stats()
    assert (s.sent, s.acked, s.rejected, s.dropped) == (3, 0, 3, 0)
    assert "expected shape (3,)" in s.last_error
    assert server.stats().rejected == 2


def test_close_releases_threads_and_sockets():
    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    threads, before = threading.active_count(), fds()
    for _ in range(3):
        server = LearnerServer(Collect(), "tcp://127.0.0.1:*", **FAST)
        client = ActorClient(server.address, "robot0", batch_size=2, **FAST)
        for i in range(4):
            _add(client, i)
        _serve_until(server, 4)
        client.close()
        server.close()
        server.close()  # idempotent
    assert threading.active_count() == threads
    assert fds() == before


def test_learner_sigkill_and_restart_loses_nothing_silently(tmp_path):
    """Transitions sent while the learner is down are delivered after its restart or counted
    as dropped: sent == delivered (unique) + dropped, exactly."""
    log = tmp_path / "deliveries.txt"
    learner, info = start(LEARNER, "tcp://127.0.0.1:*", str(log))
    address = info["address"]
    client = ActorClient(
        address,
        "robot0",
        batch_size=10,
        outbox_batches=8,
        max_in_flight=2,
        ack_timeout=0.5,
        heartbeat_interval=0.05,
        peer_timeout=0.5,
    )
    i = 0

    def stream(n: int) -> None:
        nonlocal i
        for _ in range(n):
            _add(client, i)
            i += 1
            time.sleep(0.0005)

    try:
        stream(200)
        wait_until(lambda: client.stats().acked >= 100)
        learner.kill()  # SIGKILL: no goodbye; its queue and unsent acks vanish
        learner.wait()
        t_detect = wait_until(lambda: stream(1) or not client.connected)
        down_from = i
        stream(400)  # 400 transitions > outbox (80): most must be counted as dropped
        down_to = i
        assert client.stats().dropped > 0
        learner, _ = start(LEARNER, address, str(log))  # same address
        wait_until(lambda: client.connected)
        stream(100)
        assert client.flush(timeout=20)
        s = client.stats()
    finally:
        learner.send_signal(signal.SIGTERM)
        learner.wait(timeout=10)
        client.close()
    rows = read_deliveries(log)
    unique = {(a, e, seq): (n, lo, hi) for a, e, seq, n, lo, hi in rows}
    delivered = sum(n for n, _, _ in unique.values())
    assert s.sent == i >= 700
    assert s.sent == delivered + s.dropped  # exact: nothing lost silently
    assert s.acked == delivered and s.pending == 0 and s.reconnects >= 1
    assert t_detect < 0.5 + 0.05 + 5.0  # peer timeout + heartbeat, plus scheduling slack
    # Some of what was added while the learner was down arrived after the restart.
    assert any(down_from <= lo < down_to for _, lo, _ in unique.values())
    # Every delivered transition is one the actor added, none twice.
    idx = sorted(j for _, lo, hi in unique.values() for j in range(lo, hi + 1))
    assert len(idx) == len(set(idx)) == delivered and idx[-1] < i
