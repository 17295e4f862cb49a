"""LearnerServer: de-duplication and acks (driven by a raw ZeroMQ peer speaking the protocol),
malformed input, back-pressure, failing callbacks, and an actor process killed and restarted."""

from __future__ import annotations

import signal
import time

import numpy as np
import pytest

pytest.importorskip("zmq", reason="robotrl.distributed needs the 'dist' extra (pyzmq)")

import zmq
from dist_procs import ACTOR, start, wait_until

from robotrl.distributed import LearnerServer
from robotrl.distributed import protocol as P
from robotrl.distributed.transitions import encode_arrays, flatten_transition, stack

FAST = dict(heartbeat_interval=0.05, peer_timeout=0.5)


class Collect:
    def __init__(self, fail_first: int = 0) -> None:
        self.batches: list = []
        self.fail = fail_first

    def on_transitions(self, batch) -> None:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("learner hiccup")
        self.batches.append(batch)

    def state_dict(self) -> dict:
        return {"w": np.ones(2, np.float32)}


def _payload(n: int, dim: int = 3, start: int = 0) -> bytes:
    rows = []
    for i in range(start, start + n):
        x = np.full(dim, i, np.float32)
        rows.append(flatten_transition({"x": x}, x[:2], float(i), {"x": x}, False, False))
    return encode_arrays(stack(rows))


class RawActor:
    """A hand-driven DEALER: sends exactly what a test says, reads what comes back."""

    def __init__(self, address: str, actor_id: str = "raw", epoch: int = 1) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(address)
        self.actor_id, self.epoch = actor_id, epoch

    def send(self, kind: str, payload: bytes | None = None, floor: int = 0, **kw) -> None:
        self.sock.send_multipart(
            P.pack(kind, payload, a=self.actor_id, e=self.epoch, f=floor, w=None, **kw)
        )

    def recv(self, kind: str, timeout: float = 10.0) -> dict:
        """The next message of ``kind`` (others skipped)."""
        while self.sock.poll(int(timeout * 1000)):
            header, _ = P.unpack(self.sock.recv_multipart(), P.LEARNER_KINDS)
            if header["k"] == kind:
                return header
        raise AssertionError(f"no {kind} within {timeout} s")

    def acked(self, count: int) -> list[int]:
        """Seqs of the next acks until ``count`` are collected (acks may come split)."""
        seqs: list[int] = []
        while len(seqs) < count:
            seqs += self.recv(P.ACK)["s"]
        return seqs

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()


@pytest.fixture
def server():
    learner = Collect()
    with LearnerServer(learner, "tcp://127.0.0.1:*", **FAST) as s:
        yield s


def test_duplicates_are_delivered_once_and_reacknowledged(server):
    raw = RawActor(server.address)
    try:
        raw.send(P.HELLO)
        assert raw.recv(P.WELCOME)["l"] == server.session
        raw.send(P.BATCH, _payload(4), s=0, n=4)
        raw.send(P.BATCH, _payload(4), s=0, n=4)  # re-sent while queued: ignored
        raw.send(P.BATCH, _payload(2, start=4), s=1, n=2)
        wait_until(lambda: server.stats().received == 3)
        assert server.deliver() == 6
        assert raw.acked(2) == [0, 1]
        raw.send(P.BATCH, _payload(4), s=0, n=4)  # its ack was "lost": re-acked, not delivered
        assert raw.recv(P.ACK)["s"] == [0]
        raw.send(P.PING, floor=2)  # the actor settled everything below 2
        raw.send(P.BATCH, _payload(4), s=1, n=4)  # below the floor: duplicate
        assert raw.recv(P.ACK)["s"] == [1]
        assert server.deliver() == 0
        st = server.stats()
        assert (st.received, st.delivered, st.delivered_batches, st.duplicates) == (5, 6, 2, 3)
        rewards = np.concatenate([b.reward for b in server.learner.batches])
        np.testing.assert_array_equal(rewards, np.arange(6))
        assert [(b.actor_id, b.epoch, b.seq) for b in server.learner.batches] == [
            ("raw", 1, 0),
            ("raw", 1, 1),
        ]
    finally:
        raw.close()


def test_malformed_and_mismatched_input_is_refused_and_counted(server):
    raw = RawActor(server.address)
    try:
        raw.sock.send_multipart([b"not json"])
        raw.sock.send_multipart([b'{"p": 99, "k": "ping"}'])
        raw.send(P.BATCH, b"\x00garbage", s=0, n=1)
        assert "not a valid safetensors payload" in raw.recv(P.NACK)["r"]
        raw.send(P.BATCH, _payload(2), s=1, n=3)
        assert "header says 3" in raw.recv(P.NACK)["r"]
        raw.send(P.BATCH, _payload(2), s=2, n=2)  # fixes the schema: x (3,)
        raw.send(P.BATCH, _payload(2, dim=5), s=3, n=2)
        nack = raw.recv(P.NACK)
        assert nack["s"] == 3 and "expected shape (3,)" in nack["r"]
        raw.send(P.PING)
        raw.recv(P.PONG)  # still serving
        assert server.deliver() == 2
        assert server.stats().rejected == 5
    finally:
        raw.close()


def test_stale_epoch_is_refused(server):
    new, old = RawActor(server.address, "robot0", 2), RawActor(server.address, "robot0", 1)
    try:
        new.send(P.HELLO)
        new.recv(P.WELCOME)
        old.send(P.BATCH, _payload(1), s=0, n=1)
        assert "stale epoch" in old.recv(P.NACK)["r"]
        assert server.actors()["robot0"].epoch == 2
    finally:
        new.close()
        old.close()


def test_full_queue_pushes_back_and_the_resend_is_taken():
    with LearnerServer(Collect(), "tcp://127.0.0.1:*", max_queued_batches=1, **FAST) as server:
        raw = RawActor(server.address)
        try:
            raw.send(P.BATCH, _payload(1), s=0, n=1)
            raw.send(P.BATCH, _payload(1, start=1), s=1, n=1)  # queue full: not taken
            wait_until(lambda: server.stats().busy == 1)
            assert server.deliver() == 1
            assert raw.recv(P.ACK)["s"] == [0]
            raw.send(P.BATCH, _payload(1, start=1), s=1, n=1)  # the actor's re-send
            wait_until(lambda: server.deliver() == 1)
            assert raw.recv(P.ACK)["s"] == [1]
        finally:
            raw.close()


def test_failing_callback_leaves_the_batch_unacknowledged():
    # the raw actor sends no heartbeats: a peer timeout that load cannot reach keeps it alive
    slow_peer = {**FAST, "peer_timeout": 600.0}
    with LearnerServer(Collect(fail_first=1), "tcp://127.0.0.1:*", **slow_peer) as server:
        raw = RawActor(server.address)
        try:
            raw.send(P.BATCH, _payload(3), s=0, n=3)
            wait_until(lambda: server.stats().received == 1)
            with pytest.raises(RuntimeError, match="hiccup"):
                server.deliver()
            raw.send(P.BATCH, _payload(3), s=0, n=3)  # re-sent after the ack timeout
            wait_until(lambda: server.deliver() == 3)
            assert raw.recv(P.ACK)["s"] == [0]
            assert server.stats().delivered == 3
        finally:
            raw.close()


def test_actor_sigkill_and_restart_with_the_same_id():
    learner = Collect()
    with LearnerServer(learner, "tcp://127.0.0.1:*", publish_every_s=1e9, **FAST) as server:
        server.publish()
        actor, first = start(ACTOR, server.address, "robot0")
        try:
            wait_until(lambda: server.deliver(timeout=0.01) >= 0 and server.stats().delivered > 50)
            wait_until(lambda: server.actors()["robot0"].weights_version == 1)
            actor.kill()
            actor.wait()
            dead_after = wait_until(lambda: not server.actors()["robot0"].alive)
            assert dead_after < 0.5 + 5.0  # peer timeout plus scheduling slack
            server.deliver()
            before = server.stats().delivered
            actor, second = start(ACTOR, server.address, "robot0")
            assert second["epoch"] > first["epoch"]
            wait_until(
                lambda: (
                    server.deliver(timeout=0.01) >= 0
                    and server.actors()["robot0"].alive
                    and server.stats().delivered > before + 50
                )
            )
            info = server.actors()["robot0"]
            assert info.epoch == second["epoch"]
            assert server.publish() == 2
            wait_until(lambda: server.actors()["robot0"].weights_version == 2)
        finally:
            actor.send_signal(signal.SIGKILL)
            actor.wait()
    epochs = [b.epoch for b in learner.batches]
    assert set(epochs) == {first["epoch"], second["epoch"]}
    assert epochs == sorted(epochs)  # the old incarnation's batches all came first
    fresh = [b for b in learner.batches if b.epoch == second["epoch"]]
    assert fresh[0].seq == 0 and fresh[0].reward[0] == 0  # the new epoch starts over
    assert server.stats().rejected == 0 and server.stats().duplicates == 0


def test_an_idle_learner_publishes_no_new_version():
    """Weights are republished by time only when updates ran since the last publish, so an
    actor sees the version settle once the learner has run every update it owed."""
    with LearnerServer(
        Collect(), "tcp://127.0.0.1:*", publish_every_updates=0, publish_every_s=1e-6, **FAST
    ) as s:
        first = s.publish()
        time.sleep(0.01)  # the publish period is long past
        assert s.updated(0) is None and s.updated(0) is None and s.version == first
        assert s.updated(3) == first + 1  # period due and the weights changed
        assert s.updated(0) is None and s.version == first + 1
