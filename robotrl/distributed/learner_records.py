"""Records the learner server keeps: per-actor bookkeeping (I/O thread) and the immutable
snapshots it hands out (:class:`ActorInfo`, :class:`LearnerStats`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PeerRecord:
    """What the server knows of one actor id (the server's I/O thread only): its session
    (``epoch``), route, liveness, the seqs queued or delivered above the actor's settled
    ``floor`` (for de-duplication), counters and the weights it holds / was last sent."""

    epoch: int
    route: bytes = b""
    last_seen: float = 0.0
    alive: bool = False
    floor: int = 0
    queued: set[int] = field(default_factory=set)
    delivered: set[int] = field(default_factory=set)  # seqs >= floor
    batches: int = 0
    transitions: int = 0
    held: tuple[str, int] | None = None  # weights the actor reports holding
    sent_version: int = -1
    sent_at: float = 0.0

    def advance(self, floor: int) -> None:
        """The actor settled every seq below ``floor``: forget their delivery records."""
        if floor > self.floor:
            self.floor = floor
            self.delivered = {s for s in self.delivered if s >= floor}


@dataclass(frozen=True)
class ActorInfo:
    """One actor as the server sees it; ``last_seen`` is ``time.monotonic()``."""

    actor_id: str
    epoch: int
    alive: bool
    last_seen: float
    delivered_batches: int
    delivered_transitions: int
    weights_version: int  # held by the actor, -1 unknown / other session


@dataclass(frozen=True)
class LearnerStats:
    """Counters; batches unless named otherwise."""

    received: int  # batch messages received, duplicates included
    delivered: int  # transitions handed to on_transitions
    delivered_batches: int
    duplicates: int  # re-sent batches already queued or delivered (not delivered again)
    rejected: int  # refused for good: malformed, schema mismatch, stale epoch
    busy: int  # not taken because the queue was full (the actor re-sends them)
    queued: int  # waiting for deliver()
    version: int  # weights version last published
    actors_alive: int
    last_error: str
