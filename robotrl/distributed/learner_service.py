"""Learner side of the actor/learner split: a Ray actor that takes transitions, trains, and
publishes weights.

:class:`LearnerService` hosts a learner algorithm (:class:`~robotrl.distributed.roles.Learner`;
optionally with ``work``/``ready``/``save``/``resume`` as
:class:`~robotrl.algos.residual_learner.ResidualLearner` has them). :func:`serve_learner` runs
it as a named, restartable Ray actor: Ray restarts a learner whose process dies, and the new one
resumes from its last checkpoint in ``state_dir`` (its replay is lost and refills).

Transitions: an actor calls :meth:`LearnerService.push` with one encoded batch named by (actor
id, epoch, seq). The call returns once the batch is in the learner (``on_transitions`` returned):
its return value is the acknowledgement. A batch re-sent after a lost reply is recognised by its
seq and acknowledged without a second delivery; an older epoch of an actor id (a second process
with the same id) and malformed batches are refused for good. Within one learner process
delivery is exactly-once; across a learner restart at-least-once.

Weights: every ``publish_every_updates`` updates or ``publish_every_s`` seconds with updates,
whichever comes first, the learner's ``state_dict()`` goes into Ray's object store once, with
the next version number; :meth:`LearnerService.weights` hands its reference to any actor that
holds an older one. An idle learner publishes nothing new.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from robotrl.distributed.cluster import NAMESPACE, connect
from robotrl.distributed.learner_records import ActorInfo, LearnerStats, PeerRecord
from robotrl.distributed.transitions import (
    SchemaError,
    TransitionBatch,
    TransitionSchema,
    decode_batch,
    state_dict_arrays,
)

log = logging.getLogger(__name__)

DEFAULT_NAME = "robotrl-learner"

Clock = Callable[[], float]


class LearnerService:
    """A learner behind the push/weights interface actors call.

    Args:
        make_learner: builds the learner (called again in a restarted process).
        state_dir: checkpoints (resume from it at start; None: no checkpoints).
        meta: stored with every checkpoint.
        publish_every_updates, publish_every_s: weight publication period (whichever first).
        checkpoint_every_s: at a publication, checkpoint when this long passed since the last.
        on_delivery: sees every batch after ``on_transitions`` took it, before the ack.
        put: stores a published state dict and returns what :meth:`weights` hands out
            (``ray.put`` in a Ray actor; default: the dict itself).
        run: start the update loop thread (False: the caller calls :meth:`step`).
        threads: torch intra-op threads of this process (None: leave as is).
        clock: monotonic seconds (tests inject a stepped one).
    """

    def __init__(
        self,
        make_learner: Callable[[], Any],
        state_dir: str | os.PathLike[str] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        publish_every_updates: int = 100,
        publish_every_s: float = 1.0,
        checkpoint_every_s: float = 5.0,
        on_delivery: Callable[[TransitionBatch], None] | None = None,
        put: Callable[[Any], Any] | None = None,
        run: bool = True,
        threads: int | None = 1,
        clock: Clock = time.monotonic,
    ) -> None:
        if publish_every_updates < 0 or publish_every_s <= 0:
            raise ValueError(
                f"need publish_every_updates >= 0 and publish_every_s > 0, got "
                f"{publish_every_updates=}, {publish_every_s=}"
            )
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        self.learner = make_learner()
        self.state_dir = None if state_dir is None else Path(state_dir)
        self.meta = dict(meta or {})
        self.publish_every_updates, self.publish_every_s = publish_every_updates, publish_every_s
        self.checkpoint_every_s = checkpoint_every_s
        self.on_delivery, self._put = on_delivery, put or (lambda x: x)
        self.clock = clock
        self.session = uuid.uuid4().hex[:12]
        resumed = None
        if self.state_dir is not None and hasattr(self.learner, "resume"):
            resumed = self.learner.resume(self.state_dir)
        self.version = -1 if resumed is None else int(resumed)
        self.resumed_version = resumed
        self._weights: tuple[int, float, Any] | None = None
        self._lock = threading.Lock()  # the learner and the records
        self._peers: dict[str, PeerRecord] = {}
        self._schema: TransitionSchema | None = None
        self._n = dict.fromkeys(
            ("received", "delivered", "delivered_batches", "duplicates", "rejected", "updates"), 0
        )
        self._since_publish = 0
        self._published_at = self._checkpoint_at = clock()
        self._last_error = ""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        if self._ready():
            self._publish()  # a resumed learner's actors get its weights at once
        if run:
            self._thread = threading.Thread(target=self._loop, name="learner", daemon=True)
            self._thread.start()

    # ------------------------------------------------------------------ actor-facing calls
    def push(
        self, actor_id: str, epoch: int, floor: int, seq: int, payload: bytes
    ) -> tuple[str, str]:
        """Deliver one batch; ``("ack", "")`` once the learner has it (or had it: a
        duplicate), ``("reject", reason)`` for a batch refused for good. ``floor``: every seq
        below it is settled on the actor's side. An exception from the learner propagates: the
        batch is not acknowledged and the actor sends it again."""
        with self._lock:
            self._n["received"] += 1
            peer = self._peers.get(actor_id)
            if peer is None or epoch > peer.epoch:  # new actor, or it restarted
                peer = self._peers[actor_id] = PeerRecord(epoch)
            if epoch < peer.epoch:
                return self._refuse(
                    f"actor {actor_id!r} epoch {epoch} is older than {peer.epoch} (a second "
                    f"process with the same actor id?)"
                )
            peer.last_seen = self.clock()
            peer.advance(floor)
            if seq < peer.floor or seq in peer.delivered:
                self._n["duplicates"] += 1  # our earlier reply was lost
                return "ack", ""
            try:
                batch = decode_batch(payload, self._schema)
            except (SchemaError, ValueError) as e:
                return self._refuse(f"batch {seq} of actor {actor_id!r} refused: {e}")
            batch.actor_id, batch.epoch, batch.seq = actor_id, epoch, seq
            self.learner.on_transitions(batch)
            if self.on_delivery is not None:
                self.on_delivery(batch)
            if self._schema is None:
                self._schema = TransitionSchema.of({k: v[0] for k, v in batch.fields.items()})
            peer.delivered.add(seq)
            peer.batches += 1
            peer.transitions += len(batch)
            self._n["delivered"] += len(batch)
            self._n["delivered_batches"] += 1
        self._wake.set()
        return "ack", ""

    def _refuse(self, reason: str) -> tuple[str, str]:
        self._n["rejected"] += 1
        self._last_error = reason
        log.error("learner: %s", reason)
        return "reject", reason

    def weights(self, held: tuple[str, int] | None) -> tuple[str, int, float, Any] | None:
        """``(session, version, published_at, state)`` of the newest weights when the caller
        holds other ones (``held``: its ``(session, version)``, None: none), else None.
        ``state`` is what ``put`` made of the state dict (a Ray object reference)."""
        w = self._weights
        if w is None or held == (self.session, w[0]):
            return None
        return self.session, w[0], w[1], w[2]

    # ------------------------------------------------------------------ training
    def step(self, max_updates: int = 4) -> int:
        """Run up to ``max_updates`` due learner updates, then publish / checkpoint when due;
        returns the updates run."""
        with self._lock:
            work = getattr(self.learner, "work", None)
            n = int(work(max_updates)) if work is not None else 0
            self._n["updates"] += n
            self._since_publish += n
            now = self.clock()
            if not self._ready():
                return n
            due = self._weights is None or (
                self._since_publish > 0
                and (
                    (
                        self.publish_every_updates
                        and self._since_publish >= self.publish_every_updates
                    )
                    or now - self._published_at >= self.publish_every_s
                )
            )
            if due:
                self._publish()
                if now - self._checkpoint_at >= self.checkpoint_every_s:
                    self._checkpoint()
        return n

    def _ready(self) -> bool:
        return bool(getattr(self.learner, "ready", True))

    def _publish(self) -> None:
        arrays = state_dict_arrays(self.learner.state_dict())
        self.version += 1
        now = self.clock()
        self._weights = (self.version, now, self._put(arrays))
        self._published_at, self._since_publish = now, 0

    def _checkpoint(self) -> None:
        if self.state_dir is not None and hasattr(self.learner, "save"):
            self.learner.save(self.state_dir, self.version, self.meta)
        self._checkpoint_at = self.clock()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                n = self.step()
            except Exception as e:  # keep serving: the error is in stats(), the log has it
                self._last_error = f"update failed: {e!r}"
                log.exception("learner: update failed")
                n = 0
            if n == 0:
                self._wake.wait(0.02)  # idle until a push arrives
                self._wake.clear()

    # ------------------------------------------------------------------ inspection, end
    def stats(self) -> LearnerStats:
        n = self._n
        return LearnerStats(
            n["received"],
            n["delivered"],
            n["delivered_batches"],
            n["duplicates"],
            n["rejected"],
            n["updates"],
            self.version if self._weights is not None else -1,
            self.session,
            len(self._peers),
            self._last_error,
        )

    def actors(self) -> dict[str, ActorInfo]:
        with self._lock:
            return {
                a: ActorInfo(a, p.epoch, p.last_seen, p.batches, p.transitions)
                for a, p in self._peers.items()
            }

    def summary(self) -> dict[str, Any]:
        """Counters of the learner and of this session, for a run's JSON line."""
        s, ln = self.stats(), self.learner
        agent = getattr(ln, "agent", None)
        return {
            "updates": getattr(agent, "updates", s.updates),
            "received": getattr(ln, "received", s.delivered),
            "session_received": getattr(ln, "session_received", s.delivered),
            "cut": getattr(ln, "cut", 0),
            "version": s.version,
            "delivered": s.delivered,
            "duplicates": s.duplicates,
            "rejected": s.rejected,
            "resumed_version": self.resumed_version,
            **getattr(ln, "last_logs", {}),
        }

    def pid(self) -> int:
        """The process hosting this learner (the one a kill test kills)."""
        return os.getpid()

    def shutdown(self) -> dict[str, Any]:
        """Stop the update loop, checkpoint (if ready) and return :meth:`summary`."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._ready():
                if self._since_publish or self._weights is None:
                    self._publish()
                self._checkpoint()
        return self.summary()


def serve_learner(
    make_learner: Callable[[], Any],
    *,
    name: str = DEFAULT_NAME,
    address: str | None = None,
    state_dir: str | os.PathLike[str],
    meta: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
    publish_every_updates: int = 100,
    publish_every_s: float = 1.0,
    checkpoint_every_s: float = 5.0,
    on_ready: Callable[[dict[str, Any]], None] | None = None,
    on_delivery: Callable[[TransitionBatch], None] | None = None,
    threads: int | None = 1,
    poll_s: float = 0.5,
) -> dict[str, Any]:
    """Run a :class:`LearnerService` as the Ray actor ``name`` (restarted by Ray whenever its
    process dies) in the cluster at ``address`` (None: a local instance) until ``stop`` is set;
    returns its final counters.

    ``threads``: torch threads of the learner process (None: leave as is).
    ``on_ready`` gets ``{"address", "name", "pid", "version"}`` once the learner answers, and
    again (``"restarted": True``) each time a restarted one does.
    """

    gcs = connect(address)  # first: it sets up Ray's authentication before Ray is imported
    import ray

    stop = stop or threading.Event()
    # Any: Ray types an actor handle's methods as plain callables, without their .remote
    remote: Any = ray.remote(LearnerService).options(
        name=name,
        namespace=NAMESPACE,
        max_restarts=-1,
        max_task_retries=0,
        max_concurrency=16,
        num_cpus=0,
        # Ray runs workers at nice 15; a learner beside CPU-heavy work then starves for minutes
        runtime_env={"env_vars": {"RAY_worker_niceness": "0"}},
    )
    try:
        service = remote.remote(
            make_learner,
            state_dir,
            meta=meta,
            publish_every_updates=publish_every_updates,
            publish_every_s=publish_every_s,
            checkpoint_every_s=checkpoint_every_s,
            on_delivery=on_delivery,
            put=ray.put,
            threads=threads,
        )
    except ValueError as e:  # the name is taken in this cluster
        raise RuntimeError(
            f"a learner named {name!r} already runs in the Ray cluster at {gcs}: stop it, or "
            f"give this one another dist.learner name ({e})"
        ) from None
    pid = None
    try:
        while not stop.is_set():
            try:
                now_pid = ray.get(service.pid.remote(), timeout=max(poll_s, 1.0) * 10)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                now_pid = None  # restarting
            if now_pid is not None and now_pid != pid:
                if on_ready is not None:
                    version = ray.get(service.stats.remote()).version
                    on_ready(
                        {"address": gcs, "name": name, "pid": now_pid, "version": version,
                         "restarted": pid is not None}
                    )  # fmt: skip
                pid = now_pid
            stop.wait(poll_s)
        return dict(ray.get(service.shutdown.remote()))
    finally:
        ray.kill(service, no_restart=True)


@contextlib.contextmanager
def serving(
    make_learner: Callable[[], Any], *, start_timeout: float = 120.0, **kwargs: Any
) -> Iterator[dict[str, Any]]:
    """:func:`serve_learner` (``kwargs`` are its arguments but ``stop`` and ``on_ready``) on a
    background thread of this process while the block runs. Yields a dict holding the newest
    ``on_ready`` info (``"pid"``, ``"version"``, ``"restarted"``, ...; ``"t"``: monotonic time of
    that call), ``"ready"``: an event set each time a (re)started learner answers, and, after
    the block, ``"out"``: the final counters. Raises RuntimeError when no learner answers
    within ``start_timeout`` s."""
    stop, ready = threading.Event(), threading.Event()
    box: dict[str, Any] = {"ready": ready}

    def on_ready(info: dict[str, Any]) -> None:
        box.update(info, t=time.monotonic())
        ready.set()

    def main() -> None:
        try:
            box["out"] = serve_learner(make_learner, stop=stop, on_ready=on_ready, **kwargs)
        except BaseException as e:  # surfaced to the caller below
            box["error"] = e
            ready.set()

    thread = threading.Thread(target=main, name="learner-driver", daemon=True)
    thread.start()
    if not ready.wait(start_timeout) or "error" in box:
        stop.set()
        raise RuntimeError(f"the learner did not start: {box.get('error')!r}")
    try:
        yield box
    finally:
        stop.set()
        thread.join(60)
