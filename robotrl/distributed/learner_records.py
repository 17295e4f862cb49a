"""Records the learner service keeps per actor, and the immutable snapshots it hands out
(:class:`ActorInfo`, :class:`LearnerStats`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PeerRecord:
    """What the learner knows of one actor id: its session (``epoch``), the seqs delivered
    above the actor's settled ``floor`` (for de-duplication), counters and when it was last
    heard from (the service's clock, s)."""

    epoch: int
    floor: int = 0
    delivered: set[int] = field(default_factory=set)  # seqs >= floor
    batches: int = 0
    transitions: int = 0
    last_seen: float = 0.0

    def advance(self, floor: int) -> None:
        """The actor settled every seq below ``floor``: forget their delivery records."""
        if floor > self.floor:
            self.floor = floor
            self.delivered = {s for s in self.delivered if s >= floor}


@dataclass(frozen=True)
class ActorInfo:
    """One actor as the learner sees it; ``last_seen`` on the learner's clock [s]."""

    actor_id: str
    epoch: int
    last_seen: float
    delivered_batches: int
    delivered_transitions: int


@dataclass(frozen=True)
class LearnerStats:
    """Counters of one learner session; batches unless named otherwise."""

    received: int  # batch pushes received, duplicates included
    delivered: int  # transitions handed to on_transitions
    delivered_batches: int
    duplicates: int  # re-sent batches already delivered (acknowledged, not delivered again)
    rejected: int  # refused for good: malformed, schema mismatch, stale epoch
    updates: int  # learner updates run by this session
    version: int  # weights version last published (-1: none yet)
    session: str  # changes when the learner restarts
    actors: int  # actor ids heard from
    last_error: str
