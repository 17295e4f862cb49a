"""Robot-side end of the actor/learner link: stream transitions out, take weights in.

The control loop only calls :meth:`ActorClient.add`, :meth:`~ActorClient.poll_weights` /
:meth:`~ActorClient.sync` and :meth:`~ActorClient.stats`; none of them does network I/O or waits
on the I/O thread (they validate, copy and append to a queue, or read a reference), so a dead,
slow or restarting learner never stalls the robot. A background thread owns the ZeroMQ socket:
it batches transitions, keeps them in the :class:`~robotrl.distributed.outbox.Outbox` until
acknowledged, sends heartbeats, and reconnects.

Deadlines: every batch must be acknowledged within ``ack_timeout`` or it is re-sent; a learner
silent for ``peer_timeout`` (no pong, ack or weights although pings go out every
``heartbeat_interval``) is declared dead: the socket is closed, a fresh one connects to the same
address, and once the learner answers (restarted or back) every unacknowledged batch is re-sent.
A learner that restarted faster than that is noticed by its new session id and gets the same
re-send. Transitions are lost only by outbox overflow, and then counted (``dropped``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq

from robotrl.distributed import protocol as P
from robotrl.distributed.outbox import Outbox
from robotrl.distributed.roles import Actor
from robotrl.distributed.transitions import (
    TransitionSchema,
    decode_arrays,
    encode_arrays,
    flatten_transition,
    stack,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WeightsUpdate:
    """A state dict broadcast by the learner. ``version`` increases within a learner
    ``session``; a restarted learner has a new session. ``published_at``/``received_at`` are
    ``time.monotonic()`` of the learner and of this process (comparable on one machine only)."""

    version: int
    session: str
    state_dict: dict[str, np.ndarray]
    published_at: float
    received_at: float


@dataclass(frozen=True)
class ActorStats:
    """Counters in transitions unless named otherwise. Once :meth:`ActorClient.flush` has
    returned True: ``sent == acked + dropped + rejected``."""

    sent: int  # handed to add()
    acked: int  # acknowledged by the learner (delivered to its algorithm)
    dropped: int  # evicted by outbox overflow, never transmitted
    rejected: int  # refused by the learner for good (nack: schema, stale epoch)
    pending: int  # not yet acknowledged (queued, batching, or in the outbox)
    resent: int  # batches re-transmitted (late ack or reconnect)
    in_flight: int  # batches transmitted and not yet acknowledged
    connected: bool  # the learner answered within peer_timeout
    reconnects: int  # contacts re-established after a dead learner or a learner restart
    weights_version: int  # newest version received (-1: none yet)
    last_error: str


class ActorClient:
    """Stream transitions to a :class:`~robotrl.distributed.LearnerServer` and receive weights.

    Args:
        address: the learner's endpoint, e.g. ``"tcp://127.0.0.1:5555"``.
        actor_id: stable name of this actor (1-64 of ``[A-Za-z0-9_.-]``). A restarted actor
            keeps its id and starts a new epoch (its start time in ns) with seq 0.
        schema: fields/shapes/dtypes of a transition; default: those of the first ``add``.
        batch_size: T, transitions per batch.
        batch_max_age: s a partial batch waits before it is sent anyway.
        outbox_batches, outbox_bytes: outbox bounds (see :mod:`robotrl.distributed.outbox` for
            the spill policy).
        max_in_flight: transmitted, unacknowledged batches at most.
        ack_timeout: s after which an unacknowledged batch is re-sent.
        heartbeat_interval: s between pings (hellos while connecting).
        peer_timeout: s of learner silence after which it is declared dead and reconnected.
    """

    def __init__(
        self,
        address: str,
        actor_id: str,
        *,
        schema: TransitionSchema | None = None,
        batch_size: int = 64,
        batch_max_age: float = 0.05,
        outbox_batches: int = 1024,
        outbox_bytes: int = 256 << 20,
        max_in_flight: int = 16,
        ack_timeout: float = 2.0,
        heartbeat_interval: float = 0.2,
        peer_timeout: float = 2.0,
    ) -> None:
        self.address = P.check_address(address, bind=False)
        self.actor_id = P.check_actor_id(actor_id)
        if batch_size < 1 or batch_max_age <= 0 or ack_timeout <= 0:
            raise ValueError(
                f"need batch_size >= 1, batch_max_age > 0, ack_timeout > 0; got "
                f"{batch_size=}, {batch_max_age=}, {ack_timeout=}"
            )
        if not 0 < heartbeat_interval < peer_timeout:
            raise ValueError(
                f"need 0 < heartbeat_interval < peer_timeout, got "
                f"{heartbeat_interval=}, {peer_timeout=}"
            )
        self.epoch = time.time_ns()
        self.batch_size, self.batch_max_age = batch_size, batch_max_age
        self.ack_timeout = ack_timeout
        self.heartbeat_interval, self.peer_timeout = heartbeat_interval, peer_timeout
        self._outbox = Outbox(outbox_batches, outbox_bytes, max_in_flight)
        self._schema = schema
        self._add_lock = threading.Lock()
        self._staging: deque[dict[str, np.ndarray]] = deque()
        self._open: list[dict[str, np.ndarray]] = []
        self._open_since = 0.0
        self._added = 0
        self._flushing = 0
        self._weights: WeightsUpdate | None = None
        self._polled: WeightsUpdate | None = None
        self._connected = False
        self._session: str | None = None
        self._reconnects = 0
        self._last_error = ""
        self._failed: BaseException | None = None
        self._closed = False
        self._progress = threading.Condition()
        self._stop = threading.Event()
        self._wake = P.Wakeup()
        self._ctx = zmq.Context(io_threads=1)
        self._thread = threading.Thread(target=self._run, name=f"actor-{actor_id}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ control-loop API
    def add(
        self,
        obs: Mapping[str, np.ndarray],
        action: np.ndarray,
        reward: float,
        next_obs: Mapping[str, np.ndarray],
        terminated: bool,
        truncated: bool,
        env_id: int = 0,
        extras: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        """Queue one transition (arguments of ``ReplayBuffer.add``; arrays are copied).

        Never blocks on the network. Raises TypeError for non-numpy values, SchemaError when the
        transition does not match the link's schema, RuntimeError after :meth:`close`.
        """
        if self._closed or self._failed is not None:
            failed = f" (I/O thread failed: {self._failed!r})" if self._failed else ""
            raise RuntimeError(f"ActorClient {self.actor_id!r} is closed{failed}")
        flat = flatten_transition(
            obs, action, reward, next_obs, terminated, truncated, env_id, extras
        )
        with self._add_lock:
            if self._schema is None:
                self._schema = TransitionSchema.of(flat)
            else:
                self._schema.check(flat)
            self._staging.append(flat)
            self._added += 1
        if len(self._staging) >= self.batch_size:
            self._wake.set()

    def poll_weights(self) -> WeightsUpdate | None:
        """The newest weights if they arrived since the last call, else None (non-blocking)."""
        w = self._weights
        if w is None or w is self._polled:
            return None
        self._polled = w
        return w

    def sync(self, actor: Actor) -> WeightsUpdate | None:
        """``actor.load_state_dict`` with the newest weights, if new ones arrived."""
        w = self.poll_weights()
        if w is not None:
            actor.load_state_dict(w.state_dict)
        return w

    @property
    def connected(self) -> bool:
        """The learner answered within ``peer_timeout``."""
        return self._connected

    @property
    def schema(self) -> TransitionSchema | None:
        return self._schema

    def stats(self) -> ActorStats:
        """A snapshot of the counters (exact when nothing is in motion, e.g. after flush)."""
        ob, w = self._outbox, self._weights
        return ActorStats(
            sent=self._added,
            acked=ob.acked_transitions,
            dropped=ob.dropped_transitions,
            rejected=ob.rejected_transitions,
            pending=len(self._staging) + len(self._open) + ob.pending_transitions,
            resent=ob.resent_batches,
            in_flight=ob.in_flight,
            connected=self._connected,
            reconnects=self._reconnects,
            weights_version=-1 if w is None else w.version,
            last_error=self._last_error,
        )

    # ------------------------------------------------------------------ blocking helpers
    def flush(self, timeout: float) -> bool:
        """Send the partial batch now and wait up to ``timeout`` s until every transition
        added so far is acknowledged, dropped or rejected. True if that happened."""
        self._flushing += 1
        self._wake.set()
        try:
            with self._progress:
                self._progress.wait_for(lambda: self._settled() or self._failed, timeout)
            return self._settled() and self._failed is None
        finally:
            self._flushing -= 1

    def _settled(self) -> bool:
        return not (self._staging or self._open or len(self._outbox))

    def close(self, timeout: float = 2.0) -> None:
        """Stop the I/O thread (telling the learner ``bye``) and release the socket. Pending
        transitions are abandoned: call :meth:`flush` first to deliver them."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(
                f"ActorClient {self.actor_id!r}: I/O thread did not stop in {timeout} s"
            )
        self._ctx.term()
        self._wake.close()

    def __enter__(self) -> ActorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ I/O thread
    def _run(self) -> None:
        sock: zmq.Socket | None = None
        try:
            poller = zmq.Poller()
            poller.register(self._wake.fileno(), zmq.POLLIN)
            next_beat = last_heard = 0.0
            while not self._stop.is_set():
                now = time.monotonic()
                if sock is None:
                    sock = self._open_socket(poller)
                    next_beat, last_heard = now, now
                self._seal(now)
                if self._connected:
                    self._transmit(sock, now)
                if now >= next_beat:
                    kind = P.PING if self._connected else P.HELLO
                    P.send(sock, self._frames(kind))
                    next_beat = now + self.heartbeat_interval
                if now - last_heard > self.peer_timeout:
                    if self._connected:
                        log.warning(
                            "actor %s: learner silent for %.1f s, reconnecting",
                            self.actor_id,
                            now - last_heard,
                        )
                    # A fresh socket drops whatever ZeroMQ still queued for the dead peer.
                    poller.unregister(sock)
                    sock.close(linger=0)
                    sock, self._connected = None, False
                    self._outbox.requeue()
                    continue
                wait = next_beat - now
                if self._open:
                    wait = min(wait, self._open_since + self.batch_max_age - now)
                events = dict(poller.poll(max(0, int(wait * 1000)) + 1))
                if self._wake.fileno() in events:
                    self._wake.drain()
                if sock in events and self._receive(sock):
                    last_heard = time.monotonic()
                with self._progress:
                    self._progress.notify_all()
        except BaseException as e:  # never die silently: add() and flush() report it
            self._failed = e
            self._last_error = f"I/O thread failed: {e!r}"
            log.exception("actor %s: I/O thread failed", self.actor_id)
            with self._progress:
                self._progress.notify_all()
        finally:
            if sock is not None:
                P.send(sock, self._frames(P.BYE))
                sock.close(linger=0)
            self._connected = False

    def _open_socket(self, poller: zmq.Poller) -> zmq.Socket:
        sock = self._ctx.socket(zmq.DEALER)
        P.configure(
            sock, heartbeat_interval=self.heartbeat_interval, peer_timeout=self.peer_timeout
        )
        sock.setsockopt(zmq.IMMEDIATE, 1)  # no queueing towards a peer that is not connected
        sock.connect(self.address)
        poller.register(sock, zmq.POLLIN)
        return sock

    def _frames(self, kind: str, payload: bytes | None = None, **fields: Any) -> list[bytes]:
        w = self._weights
        held = None if w is None else [w.session, w.version]
        return P.pack(
            kind, payload, a=self.actor_id, e=self.epoch, f=self._outbox.floor, w=held, **fields
        )

    def _seal(self, now: float) -> None:
        """Move queued transitions into batches, and full or old batches into the outbox."""
        for _ in range(len(self._staging)):
            if not self._open:
                self._open_since = now
            self._open.append(self._staging.popleft())
            if len(self._open) == self.batch_size:
                self._push_open()
        if self._open and (self._flushing or now - self._open_since >= self.batch_max_age):
            self._push_open()

    def _push_open(self) -> None:
        rows = self._open
        self._outbox.push(len(rows), encode_arrays(stack(rows)))
        self._open = []

    def _transmit(self, sock: zmq.Socket, now: float) -> None:
        for entry in self._outbox.due(now, self.ack_timeout):
            if not P.send(sock, self._frames(P.BATCH, entry.payload, s=entry.seq, n=entry.n)):
                break
            self._outbox.mark_sent(entry, now)

    def _receive(self, sock: zmq.Socket) -> bool:
        """Handle every waiting message; True if at least one came from the learner."""
        heard = False
        while True:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return heard
            try:
                header, payload = P.unpack(frames, P.LEARNER_KINDS)
                self._handle(header, payload)
            except (P.ProtocolError, ValueError, TypeError, KeyError) as e:
                self._last_error = f"bad message from the learner: {e}"
                log.warning("actor %s: %s", self.actor_id, self._last_error)
                continue
            heard = True

    def _handle(self, header: dict[str, Any], payload: bytes | None) -> None:
        session = str(header["l"])
        if not self._connected or session != self._session:
            # First answer on a fresh socket, or a learner that restarted before we noticed:
            # whatever was in flight may be lost, so all unacknowledged batches go again.
            if self._session is not None:
                self._reconnects += 1
                log.info(
                    "actor %s: learner %s answering, re-sending %d batches",
                    self.actor_id,
                    session,
                    self._outbox.in_flight,
                )
            self._outbox.requeue()
            self._session, self._connected = session, True
        kind = header["k"]
        if kind == P.ACK and header.get("e") == self.epoch:
            self._outbox.ack(int(s) for s in header["s"])
        elif kind == P.NACK and header.get("e") == self.epoch:
            if self._outbox.reject(int(header["s"])):
                self._last_error = f"learner rejected batch {header['s']}: {header.get('r')}"
                log.error("actor %s: %s", self.actor_id, self._last_error)
        elif kind == P.WEIGHTS:
            if payload is None:
                raise P.ProtocolError("weights message without payload")
            version, cur = int(header["v"]), self._weights
            if cur is None or cur.session != session or version > cur.version:
                state = decode_arrays(payload)
                self._weights = WeightsUpdate(
                    version, session, state, float(header["t"]), time.monotonic()
                )
