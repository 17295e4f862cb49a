"""Robot-side end of the actor/learner split: stream transitions out, take weights in.

The control loop only calls :meth:`ActorClient.add`, :meth:`~ActorClient.poll_weights` /
:meth:`~ActorClient.sync` and :meth:`~ActorClient.stats`; none of them talks to Ray or waits on
the I/O thread (they validate, copy and append to a queue, or read a reference), so a dead, slow
or restarting learner never stalls the robot. A background thread finds the learner (a named
Ray actor, :mod:`robotrl.distributed.learner_service`), batches transitions, keeps them in the
:class:`~robotrl.distributed.outbox.Outbox` until the learner acknowledges them, and pulls the
newest weights.

Deadlines: a push not answered within ``ack_timeout`` is sent again. A push that fails because
the learner's process died makes the client re-send every unacknowledged batch once the learner
answers again (Ray restarts it; the client counts a reconnect). Transitions are lost only by
outbox overflow, and then counted (``dropped``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from robotrl.distributed.cluster import NAMESPACE, connect
from robotrl.distributed.learner_service import DEFAULT_NAME
from robotrl.distributed.outbox import Outbox
from robotrl.distributed.roles import Actor
from robotrl.distributed.transitions import (
    TransitionSchema,
    encode_arrays,
    flatten_transition,
    stack,
)

log = logging.getLogger(__name__)

_ACTOR_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def check_actor_id(actor_id: str) -> str:
    """``actor_id`` if it is 1-64 characters of ``[A-Za-z0-9_.-]``; ValueError otherwise."""
    if not isinstance(actor_id, str) or not _ACTOR_ID.fullmatch(actor_id):
        raise ValueError(f"actor_id must be 1-64 characters of [A-Za-z0-9_.-], got {actor_id!r}")
    return actor_id


@dataclass(frozen=True)
class WeightsUpdate:
    """A state dict published by the learner. ``version`` increases within a learner
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
    rejected: int  # refused by the learner for good (schema, stale epoch)
    pending: int  # not yet acknowledged (queued, batching, or in the outbox)
    resent: int  # batches re-transmitted (late ack or learner restart)
    in_flight: int  # batches transmitted and not yet acknowledged
    connected: bool  # the learner answered within peer_timeout
    reconnects: int  # contacts re-established after the learner failed
    weights_version: int  # newest version received (-1: none yet)
    last_error: str


class ActorClient:
    """Stream transitions to the learner actor ``learner`` and receive its weights.

    Args:
        actor_id: stable name of this actor (1-64 of ``[A-Za-z0-9_.-]``). A restarted actor
            keeps its id and starts a new epoch (its start time in ns) with seq 0.
        learner: the learner's Ray actor name (:func:`~robotrl.distributed.serve_learner`).
        address: the Ray cluster ("auto", "host:port"; None: the one this process joined, or
            a local instance).
        schema: fields/shapes/dtypes of a transition; default: those of the first ``add``.
        batch_size: T, transitions per batch.
        batch_max_age: s a partial batch waits before it is sent anyway.
        outbox_batches, outbox_bytes: outbox bounds (see :mod:`robotrl.distributed.outbox` for
            the spill policy).
        max_in_flight: transmitted, unacknowledged batches at most.
        ack_timeout: s after which an unanswered push is sent again.
        pull_every_s: s between asks for newer weights.
        peer_timeout: s without any answer after which the learner counts as gone.
    """

    def __init__(
        self,
        actor_id: str,
        learner: str = DEFAULT_NAME,
        *,
        address: str | None = None,
        schema: TransitionSchema | None = None,
        batch_size: int = 64,
        batch_max_age: float = 0.05,
        outbox_batches: int = 1024,
        outbox_bytes: int = 256 << 20,
        max_in_flight: int = 16,
        ack_timeout: float = 5.0,
        pull_every_s: float = 0.2,
        peer_timeout: float = 2.0,
    ) -> None:
        self.actor_id = check_actor_id(actor_id)
        if batch_size < 1 or batch_max_age <= 0 or ack_timeout <= 0 or pull_every_s <= 0:
            raise ValueError(
                f"need batch_size >= 1, batch_max_age > 0, ack_timeout > 0, pull_every_s > 0; "
                f"got {batch_size=}, {batch_max_age=}, {ack_timeout=}, {pull_every_s=}"
            )
        self.learner_name = learner
        self.address = connect(address)
        self.epoch = time.time_ns()
        self.batch_size, self.batch_max_age = batch_size, batch_max_age
        self.ack_timeout, self.pull_every_s = ack_timeout, pull_every_s
        self.peer_timeout = peer_timeout
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
        self._heard_at: float | None = None
        self._failing = False  # the last call to the learner failed: re-send when it answers
        self._reconnects = 0
        self._last_error = ""
        self._failed: BaseException | None = None
        self._closed = False
        self._progress = threading.Condition()
        self._stop = threading.Event()
        self._wake = threading.Event()
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
        """The learner answered within ``peer_timeout`` and its last call did not fail."""
        heard = self._heard_at
        return (
            heard is not None
            and not self._failing
            and time.monotonic() - heard <= self.peer_timeout
        )

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
            connected=self.connected,
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

    def wait_weights(self, min_version: int = 0, timeout: float = 10.0) -> WeightsUpdate | None:
        """Wait up to ``timeout`` s for weights of version >= ``min_version`` (of any learner
        session); the newest weights then, else None. For start-up, never in a control loop."""

        def arrived() -> bool:
            w = self._weights
            return (w is not None and w.version >= min_version) or self._failed is not None

        with self._progress:
            self._progress.wait_for(arrived, timeout)
        w = self._weights
        return w if w is not None and w.version >= min_version else None

    def _settled(self) -> bool:
        return not (self._staging or self._open or len(self._outbox))

    def close(self, timeout: float = 2.0) -> None:
        """Stop the I/O thread. Pending transitions are abandoned: call :meth:`flush` first
        to deliver them."""
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

    def __enter__(self) -> ActorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ I/O thread
    def _run(self) -> None:
        import ray

        handle = None
        sent: dict[Any, int] = {}  # push reference -> seq, one per unacknowledged batch
        pull = None  # weights request in flight
        next_pull = next_find = retry_at = 0.0
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                self._seal(now)
                if handle is None and now >= next_find:
                    handle = self._find(ray)
                    next_find = now + self.pull_every_s
                if handle is not None and now >= retry_at:
                    for entry in self._outbox.due(now, self.ack_timeout):
                        ref = handle.push.remote(
                            self.actor_id, self.epoch, self._outbox.floor, entry.seq, entry.payload
                        )
                        # a re-send replaces the earlier push: its late answer is not awaited
                        sent = {r: q for r, q in sent.items() if q != entry.seq}
                        sent[ref] = entry.seq
                        self._outbox.mark_sent(entry, now)
                    if pull is None and now >= next_pull:
                        w = self._weights
                        pull = handle.weights.remote(None if w is None else (w.session, w.version))
                        next_pull = now + self.pull_every_s
                waiting = list(sent) + ([pull] if pull is not None else [])
                busy = self._open or self._staging or self._flushing
                wait = self.batch_max_age if busy else self.pull_every_s
                if waiting:
                    ready, rest = ray.wait(waiting, num_returns=1, timeout=wait)
                    if rest and ready:
                        ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
                else:
                    self._wake.wait(wait)
                    ready = []
                self._wake.clear()
                for ref in ready:
                    if ref is pull:
                        pull = None
                        ok = self._answer(ray, ref, None)
                    else:
                        ok = self._answer(ray, ref, sent.pop(ref))
                    if not ok:  # the learner is restarting: pause before the re-sends
                        retry_at = time.monotonic() + self.pull_every_s
                with self._progress:
                    self._progress.notify_all()
        except BaseException as e:  # never die silently: add() and flush() report it
            self._failed = e
            self._last_error = f"I/O thread failed: {e!r}"
            log.exception("actor %s: I/O thread failed", self.actor_id)
            with self._progress:
                self._progress.notify_all()

    def _find(self, ray: Any) -> Any:
        try:
            return ray.get_actor(self.learner_name, namespace=NAMESPACE)
        except ValueError:
            self._last_error = f"no learner named {self.learner_name!r} in the cluster yet"
            return None

    def _answer(self, ray: Any, ref: Any, seq: int | None) -> bool:
        """Handle one finished call: a push (``seq``) or a weights request (None); False if
        the call failed."""
        try:
            reply = ray.get(ref)
            if seq is None and reply is not None:
                session, version, published_at, state = reply
                state = ray.get(state) if isinstance(state, ray.ObjectRef) else state
        except ray.exceptions.RayError as e:
            # the learner died (Ray restarts it) or failed on this batch: whatever was in
            # flight may be lost, so every unacknowledged batch goes again once it answers
            if not self._failing:
                log.warning("actor %s: learner call failed (%s); re-sending", self.actor_id, e)
            self._failing = True
            self._last_error = f"learner call failed: {type(e).__name__}"
            self._outbox.requeue()
            return False
        if self._failing:
            self._failing = False
            self._reconnects += 1
            self._outbox.requeue()
        self._heard_at = time.monotonic()
        if seq is not None:
            status, reason = reply
            if status == "ack":
                self._outbox.ack([seq])
            elif self._outbox.reject(seq):
                self._last_error = f"learner rejected batch {seq}: {reason}"
                log.error("actor %s: %s", self.actor_id, self._last_error)
        elif reply is not None:
            cur = self._weights
            if cur is None or cur.session != session or version > cur.version:
                self._weights = WeightsUpdate(
                    int(version), str(session), dict(state), float(published_at), time.monotonic()
                )
        return True

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
