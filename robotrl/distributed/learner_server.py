"""Learner-side end of the actor/learner link: receive transitions, broadcast weights.

A background thread owns the bound ZeroMQ ROUTER socket: it answers heartbeats, decodes and
checks incoming batches, drops duplicates, and pushes weights. The training loop calls
:meth:`LearnerServer.deliver`, which hands queued batches to ``learner.on_transitions`` in that
thread; only then is a batch acknowledged, so a learner killed with batches still queued loses
nothing: the actors re-send them.

De-duplication: a batch is named by (actor id, epoch, seq). Per actor the server keeps the seqs
queued or delivered above the actor's floor (every older seq is settled on the actor side); a
re-sent batch already delivered is re-acknowledged, one still queued is ignored. A newer epoch of
the same actor id (the actor restarted) replaces the old one; messages from an older epoch are
refused (``nack``: a second live process with the same id is a configuration error).
Within one learner process delivery is exactly-once; across a learner restart it is
at-least-once (a batch delivered just before a kill, whose ack was lost, is delivered again).

Weights: :meth:`publish` encodes ``learner.state_dict()`` (safetensors) with a version number and
the I/O thread pushes it to every live actor; an actor whose pings report an older version gets it
again every ``weights_resend_s``. :meth:`updated` publishes every ``publish_every_updates``
updates or ``publish_every_s`` seconds, whichever comes first.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import zmq

from robotrl.distributed import protocol as P
from robotrl.distributed.learner_records import ActorInfo, LearnerStats, PeerRecord
from robotrl.distributed.roles import Learner
from robotrl.distributed.transitions import (
    SchemaError,
    TransitionBatch,
    TransitionSchema,
    decode_batch,
    encode_arrays,
    state_dict_arrays,
)

if TYPE_CHECKING:
    from robotrl.algos.residual_learner import ResidualLearner

log = logging.getLogger(__name__)


class LearnerServer:
    """Bind ``address``, feed ``learner`` with actors' transitions, broadcast its weights.

    Args:
        learner: the algorithm (:class:`~robotrl.distributed.roles.Learner`).
        address: endpoint to bind, e.g. ``"tcp://127.0.0.1:5555"`` (port ``*``: ephemeral; the
            bound one is in :attr:`address`). All-interface binds need ``allow_any_interface``.
        schema: transition schema to accept; default: that of the first batch received.
        publish_every_updates, publish_every_s: broadcast period for :meth:`updated`
            (0 / ``inf`` disables either trigger).
        max_queued_batches: received batches waiting for :meth:`deliver` at most.
        heartbeat_interval: s between liveness checks (and ZeroMQ's own heartbeats).
        peer_timeout: s without a message after which an actor is declared dead.
        weights_resend_s: s before weights are pushed again to an actor still behind.
        initial_version: version of the weights the learner starts from (resume: continue).
    """

    def __init__(
        self,
        learner: Learner,
        address: str = "tcp://127.0.0.1:5555",
        *,
        schema: TransitionSchema | None = None,
        publish_every_updates: int = 100,
        publish_every_s: float = 1.0,
        max_queued_batches: int = 256,
        heartbeat_interval: float = 0.2,
        peer_timeout: float = 2.0,
        weights_resend_s: float = 1.0,
        initial_version: int = 0,
        allow_any_interface: bool = False,
    ) -> None:
        bind = P.check_address(address, bind=True, allow_any_interface=allow_any_interface)
        if max_queued_batches < 1 or publish_every_updates < 0 or publish_every_s <= 0:
            raise ValueError(
                f"need max_queued_batches >= 1, publish_every_updates >= 0, "
                f"publish_every_s > 0; got {max_queued_batches=}, "
                f"{publish_every_updates=}, {publish_every_s=}"
            )
        self.learner = learner
        self.session = uuid.uuid4().hex[:12]
        self.publish_every_updates, self.publish_every_s = publish_every_updates, publish_every_s
        self.max_queued_batches, self.weights_resend_s = max_queued_batches, weights_resend_s
        self.heartbeat_interval, self.peer_timeout = heartbeat_interval, peer_timeout
        self._schema = schema
        self._peers: dict[str, PeerRecord] = {}
        self._queue: deque[TransitionBatch] = deque()
        self._settled: deque[tuple[str, int, int, int, bool]] = deque()  # deliver() -> acks
        self._ready = threading.Condition()
        self._weights: tuple[int, bytes, float] | None = None  # version, payload, publish time
        self.version = initial_version
        self.updates = 0
        self._updates_since, self._published_at = 0, time.monotonic()
        self._n = dict.fromkeys(
            ["received", "delivered", "delivered_batches", "duplicates", "rejected", "busy"], 0
        )
        self._last_error = ""
        self._failed: BaseException | None = None
        self._closed = False
        self._stop = threading.Event()
        self._wake = P.Wakeup()
        self._ctx = zmq.Context(io_threads=1)
        self._sock = self._ctx.socket(zmq.ROUTER)
        P.configure(self._sock, heartbeat_interval=heartbeat_interval, peer_timeout=peer_timeout)
        self._sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # unroutable sends fail instead of vanishing
        try:
            self._sock.bind(bind)
        except zmq.ZMQError as e:
            self._sock.close(linger=0)
            self._ctx.term()
            self._wake.close()
            raise OSError(e.errno, f"cannot bind the learner to {address!r}: {e}") from e
        self.address: str = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._thread = threading.Thread(target=self._run, name="learner-server", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ training-loop API
    def deliver(self, max_batches: int | None = None, timeout: float = 0.0) -> int:
        """Hand queued batches to ``learner.on_transitions`` (in this thread, arrival order),
        waiting up to ``timeout`` s for the first; returns the transitions delivered.

        A batch whose callback raises is not acknowledged (the actor re-sends it); the
        exception propagates. RuntimeError if the server is closed or its I/O thread failed."""
        self._check_open()
        with self._ready:
            if not self._queue and timeout > 0:
                self._ready.wait_for(
                    lambda: bool(self._queue) or self._stop.is_set() or self._failed, timeout
                )
        done = batches = 0
        while max_batches is None or batches < max_batches:
            try:
                batch = self._queue.popleft()
            except IndexError:
                break
            ok = False
            try:
                self.learner.on_transitions(batch)
                ok = True
            finally:
                self._settled.append((batch.actor_id, batch.epoch, batch.seq, len(batch), ok))
                self._wake.set()
            self._n["delivered"] += len(batch)
            self._n["delivered_batches"] += 1
            done += len(batch)
            batches += 1
        return done

    def publish(self, state_dict: Mapping[str, Any] | None = None) -> int:
        """Broadcast ``state_dict`` (default ``learner.state_dict()``) as the next version;
        returns it. Encoding happens here, sending in the I/O thread (non-blocking)."""
        self._check_open()
        sd = self.learner.state_dict() if state_dict is None else state_dict
        payload = encode_arrays(state_dict_arrays(sd))
        self.version += 1
        self._weights = (self.version, payload, time.monotonic())
        self._updates_since, self._published_at = 0, time.monotonic()
        self._wake.set()
        return self.version

    def updated(self, n: int = 1) -> int | None:
        """Count ``n`` learner updates; publish when the period is due and the weights changed
        since the last publish (an idle learner publishes nothing: actors see a quiet version
        once it has run every update it owed). The version, or None."""
        self.updates += n
        self._updates_since += n
        if self._updates_since == 0:
            return None
        by_count = 0 < self.publish_every_updates <= self._updates_since
        if by_count or time.monotonic() - self._published_at >= self.publish_every_s:
            return self.publish()
        return None

    def _check_open(self) -> None:
        if self._closed or self._failed is not None:
            failed = f" (I/O thread failed: {self._failed!r})" if self._failed else ""
            raise RuntimeError(f"LearnerServer on {self.address} is closed{failed}")

    @property
    def schema(self) -> TransitionSchema | None:
        return self._schema

    def actors(self) -> dict[str, ActorInfo]:
        """Every actor id seen, alive or not."""
        w = self._weights
        return {
            a: ActorInfo(
                a,
                p.epoch,
                p.alive,
                p.last_seen,
                p.batches,
                p.transitions,
                p.held[1] if p.held and p.held[0] == self.session and w else -1,
            )
            for a, p in list(self._peers.items())
        }

    def stats(self) -> LearnerStats:
        return LearnerStats(
            **self._n,
            queued=len(self._queue),
            version=self.version,
            actors_alive=sum(p.alive for p in list(self._peers.values())),
            last_error=self._last_error,
        )

    def close(self, timeout: float = 2.0) -> None:
        """Stop the I/O thread and unbind. Queued, undelivered batches are not acknowledged."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"LearnerServer: I/O thread did not stop in {timeout} s")
        self._ctx.term()
        self._wake.close()
        with self._ready:
            self._ready.notify_all()

    def __enter__(self) -> LearnerServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ I/O thread
    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        poller.register(self._wake.fileno(), zmq.POLLIN)
        broadcast = -1
        try:
            while not self._stop.is_set():
                events = dict(poller.poll(int(self.heartbeat_interval * 1000)))
                now = time.monotonic()
                if self._wake.fileno() in events:
                    self._wake.drain()
                if self._sock in events:
                    self._receive(now)
                self._acknowledge()
                w = self._weights
                if w is not None and w[0] != broadcast:
                    broadcast = w[0]
                    for p in list(self._peers.values()):
                        if p.alive:
                            self._push_weights(p, now, force=True)
                for a, p in self._peers.items():
                    if p.alive and now - p.last_seen > self.peer_timeout:
                        p.alive = False
                        log.warning(
                            "learner: actor %s silent for %.1f s, marked dead", a, now - p.last_seen
                        )
        except BaseException as e:
            self._failed = e
            self._last_error = f"I/O thread failed: {e!r}"
            log.exception("learner: I/O thread failed")
            with self._ready:
                self._ready.notify_all()
        finally:
            self._sock.close(linger=0)

    def _send(
        self, peer: PeerRecord, kind: str, payload: bytes | None = None, **fields: Any
    ) -> bool:
        return P.send(self._sock, [peer.route, *P.pack(kind, payload, l=self.session, **fields)])

    def _receive(self, now: float) -> None:
        for _ in range(10_000):  # bounded, so timers and acks still run under a flood
            try:
                route, *frames = self._sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                header, payload = P.unpack(frames, P.ACTOR_KINDS)
                actor, epoch = P.check_actor_id(header["a"]), int(header["e"])
                floor, held = int(header["f"]), header.get("w")
            except (P.ProtocolError, KeyError, ValueError, TypeError) as e:
                self._n["rejected"] += 1
                self._last_error = f"malformed message: {e}"
                log.warning("learner: %s", self._last_error)
                continue
            peer = self._peers.get(actor)
            # A newer epoch is a restarted actor; so is any other epoch once the known one is
            # dead (a robot PC's clock may have stepped back). An older epoch while the newer
            # is alive is a second process with the same id: refused.
            if peer is None or epoch > peer.epoch or (epoch != peer.epoch and not peer.alive):
                if peer is not None:
                    log.info(
                        "learner: actor %s restarted (epoch %d -> %d)", actor, peer.epoch, epoch
                    )
                peer = self._peers[actor] = PeerRecord(epoch)
            elif epoch < peer.epoch:
                if header["k"] == P.BATCH:
                    self._n["rejected"] += 1
                    self._send(
                        PeerRecord(epoch, route),
                        P.NACK,
                        e=epoch,
                        s=header.get("s"),
                        r="stale epoch: a newer process uses this actor id",
                    )
                continue
            if not peer.alive and header["k"] != P.BYE:
                log.info("learner: actor %s connected (epoch %d)", actor, epoch)
            peer.route, peer.last_seen, peer.alive = route, now, header["k"] != P.BYE
            peer.held = tuple(held) if isinstance(held, list) and len(held) == 2 else None
            peer.advance(floor)
            if header["k"] == P.HELLO:
                self._send(peer, P.WELCOME, v=self.version)
                self._push_weights(peer, now, force=True)
            elif header["k"] == P.PING:
                self._send(peer, P.PONG, v=self.version)
                self._push_weights(peer, now, force=False)
            elif header["k"] == P.BATCH:
                self._on_batch(actor, peer, header, payload)

    def _on_batch(
        self, actor: str, peer: PeerRecord, header: dict[str, Any], payload: bytes | None
    ) -> None:
        self._n["received"] += 1
        seq = int(header["s"])
        if seq < peer.floor or seq in peer.delivered:
            self._n["duplicates"] += 1
            self._send(peer, P.ACK, e=peer.epoch, s=[seq])  # our earlier ack may have been lost
            return
        if seq in peer.queued:
            self._n["duplicates"] += 1
            return
        try:
            if payload is None:
                raise ValueError("batch message without payload")
            batch = decode_batch(payload, self._schema)
            if len(batch) != int(header["n"]):
                raise SchemaError(
                    f"header says {header['n']} transitions, payload has {len(batch)}"
                )
        except (SchemaError, ValueError) as e:
            self._n["rejected"] += 1
            self._last_error = f"batch {seq} of actor {actor} refused: {e}"
            log.error("learner: %s", self._last_error)
            self._send(peer, P.NACK, e=peer.epoch, s=seq, r=str(e))
            return
        if len(self._queue) >= self.max_queued_batches:
            self._n["busy"] += 1  # no ack: the actor re-sends after its ack timeout
            return
        if self._schema is None:
            self._schema = TransitionSchema.of({k: v[0] for k, v in batch.fields.items()})
        batch.actor_id, batch.epoch, batch.seq = actor, peer.epoch, seq
        peer.queued.add(seq)
        with self._ready:
            self._queue.append(batch)
            self._ready.notify_all()

    def _acknowledge(self) -> None:
        acks: dict[str, list[int]] = {}
        while self._settled:
            actor, epoch, seq, n, ok = self._settled.popleft()
            peer = self._peers.get(actor)
            if peer is None or peer.epoch != epoch:
                continue
            peer.queued.discard(seq)
            if ok:
                peer.delivered.add(seq)
                peer.batches += 1
                peer.transitions += n
                acks.setdefault(actor, []).append(seq)
        for actor, seqs in acks.items():
            peer = self._peers[actor]
            self._send(peer, P.ACK, e=peer.epoch, s=seqs)

    def _push_weights(self, peer: PeerRecord, now: float, *, force: bool) -> None:
        w = self._weights
        if w is None or peer.held == (self.session, w[0]):
            return
        if not force and peer.sent_version == w[0] and now - peer.sent_at < self.weights_resend_s:
            return
        if self._send(peer, P.WEIGHTS, w[1], v=w[0], t=w[2]):
            peer.sent_version, peer.sent_at = w[0], now


def serve_learner(
    learner: ResidualLearner,
    address: str,
    *,
    state_dir: str | os.PathLike[str],
    meta: dict[str, Any] | None = None,
    stop: threading.Event | None = None,
    publish_every_updates: int = 100,
    publish_every_s: float = 1.0,
    checkpoint_every_s: float = 5.0,
    heartbeat_interval: float = 0.2,
    peer_timeout: float = 2.0,
    on_ready: Callable[[dict[str, Any]], None] | None = None,
    on_delivery: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Serve ``learner`` on ``address`` until ``stop`` is set; resumes from ``state_dir`` if it
    holds a checkpoint. Returns the final counters.

    ``on_ready`` gets ``{"address", "version", "resumed"}`` once bound; ``on_delivery`` sees
    every batch after it was stored and before it is acknowledged (e.g. a delivery log).
    """
    stop = stop or threading.Event()
    version = learner.resume(state_dir) or 0
    on_transitions = learner.on_transitions
    if on_delivery is not None:

        def delivered(batch: Any) -> None:
            on_transitions(batch)
            on_delivery(batch)

        learner.on_transitions = delivered  # type: ignore[method-assign]
    server = LearnerServer(
        learner,
        address,
        publish_every_updates=publish_every_updates,
        publish_every_s=publish_every_s,
        heartbeat_interval=heartbeat_interval,
        peer_timeout=peer_timeout,
        initial_version=version,
    )
    meta = meta or {}
    ckpt_at = time.monotonic()
    try:
        if on_ready is not None:
            on_ready({"address": server.address, "version": version, "resumed": learner.resumed})
        published = False
        if learner.ready:
            server.publish()  # a resumed learner's actors get its weights at once
            published = True
        while not stop.is_set():
            server.deliver(timeout=0.0 if learner.has_work() else 0.05)
            n = learner.work()
            if not learner.ready:
                continue
            new = server.updated(n) if published else server.publish()
            published = True
            if new is not None and time.monotonic() - ckpt_at >= checkpoint_every_s:
                learner.save(state_dir, server.version, meta)
                ckpt_at = time.monotonic()
        if learner.ready:
            learner.save(state_dir, server.version, meta)
        stats = server.stats()
    finally:
        server.close()
    return {
        "updates": learner.agent.updates,
        "received": learner.received,
        "session_received": learner.session_received,
        "cut": learner.cut,
        "version": stats.version,
        "delivered": stats.delivered,
        "duplicates": stats.duplicates,
        "rejected": stats.rejected,
        "busy": stats.busy,
        **learner.last_logs,
    }
