"""The actor's outbox: encoded transition batches kept until the learner acknowledges them.

Every batch gets the next sequence number and stays here until an ``ack`` (delivered) or a
``nack`` (rejected for good) arrives. Sent batches are re-sent when their ack is late
(``ack_timeout``) and all at once after a reconnect; the learner de-duplicates.

Spill policy (bounded memory, nothing lost silently): the outbox holds at most ``max_batches``
batches and ``max_bytes`` bytes. On overflow — typically while the learner is down — the oldest
batch *that was never transmitted* is dropped and counted in ``dropped_transitions``. Batches
already transmitted (at most ``max_in_flight`` of them) are never evicted: the learner may
already have delivered them, so dropping one would make the count ambiguous. Hence, at every
moment::

    pushed == acked + dropped + rejected + pending        (in transitions)

and after the learner has acknowledged everything, ``pushed == delivered + dropped + rejected``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class OutboxEntry:
    """One batch: ``seq``, ``n`` transitions, encoded ``payload``; ``sent_at`` (monotonic s) of
    the last transmission, None while a (re)send is due."""

    seq: int
    n: int
    payload: bytes
    transmitted: bool = False
    sent_at: float | None = None


class Outbox:
    """Bounded, ordered store of unacknowledged batches (not thread-safe: one owner thread).

    Args:
        max_batches: batches kept at most (> ``max_in_flight``).
        max_bytes: encoded bytes kept at most (transmitted batches may exceed it briefly).
        max_in_flight: transmitted-but-unacknowledged batches at most (the send window).
        first_seq: seq of the first batch.
    """

    def __init__(self, max_batches: int, max_bytes: int, max_in_flight: int, first_seq: int = 0):
        if max_in_flight < 1 or max_batches <= max_in_flight or max_bytes < 1:
            raise ValueError(
                f"need max_in_flight >= 1, max_batches > max_in_flight, max_bytes >= 1; got "
                f"{max_batches=}, {max_bytes=}, {max_in_flight=}"
            )
        self.max_batches, self.max_bytes, self.max_in_flight = max_batches, max_bytes, max_in_flight
        self.next_seq = first_seq
        self._entries: OrderedDict[int, OutboxEntry] = OrderedDict()
        self._in_flight = 0
        self.pending_bytes = 0
        self.pushed_transitions = self.acked_transitions = self.rejected_transitions = 0
        self.dropped_transitions = self.dropped_batches = self.resent_batches = 0
        self.pending_transitions = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def floor(self) -> int:
        """Oldest seq still kept (every older one is acknowledged, rejected or dropped)."""
        return next(iter(self._entries), self.next_seq)

    @property
    def in_flight(self) -> int:
        """Transmitted batches not yet acknowledged."""
        return self._in_flight

    def push(self, n: int, payload: bytes) -> int:
        """Keep a new batch of ``n`` transitions; returns its seq. May drop old untransmitted
        batches (counted) to stay within the bounds — including this one if it alone is too big.
        """
        seq = self.next_seq
        self.next_seq += 1
        self._entries[seq] = OutboxEntry(seq, n, payload)
        self.pushed_transitions += n
        self.pending_transitions += n
        self.pending_bytes += len(payload)
        while len(self._entries) > self.max_batches or self.pending_bytes > self.max_bytes:
            victim = next((e for e in self._entries.values() if not e.transmitted), None)
            if victim is None:  # only in-flight batches left: they may be delivered already
                break
            self._remove(victim.seq)
            self.dropped_batches += 1
            self.dropped_transitions += victim.n
        return seq

    def _remove(self, seq: int) -> OutboxEntry:
        entry = self._entries.pop(seq)
        self.pending_transitions -= entry.n
        self.pending_bytes -= len(entry.payload)
        self._in_flight -= entry.transmitted
        return entry

    def ack(self, seqs: Iterable[int]) -> int:
        """Forget acknowledged batches; returns the transitions newly acknowledged (acks of
        unknown or already acknowledged seqs are ignored)."""
        done = sum(self._remove(s).n for s in seqs if s in self._entries)
        self.acked_transitions += done
        return done

    def reject(self, seq: int) -> int:
        """Forget a batch the learner refused for good; returns its transitions (0 if unknown)."""
        if seq not in self._entries:
            return 0
        n = self._remove(seq).n
        self.rejected_transitions += n
        return n

    def due(self, now: float, ack_timeout: float) -> list[OutboxEntry]:
        """Batches to transmit now, oldest first: transmitted ones whose ack is overdue or that
        were re-queued, then new ones while the send window has room. Call :meth:`mark_sent`
        for each one actually handed to the socket."""
        out, room = [], self.max_in_flight - self._in_flight
        for e in self._entries.values():
            if e.transmitted:
                if e.sent_at is None or now - e.sent_at >= ack_timeout:
                    out.append(e)
            elif room > 0:
                out.append(e)
                room -= 1
        return out

    def mark_sent(self, entry: OutboxEntry, now: float) -> None:
        """Record that ``entry`` went to the socket at ``now``."""
        if entry.transmitted:
            self.resent_batches += 1
        else:
            entry.transmitted = True
            self._in_flight += 1
        entry.sent_at = now

    def requeue(self) -> None:
        """Make every transmitted, unacknowledged batch due again (after a reconnect or a
        learner restart, what was in flight may be lost)."""
        for e in self._entries.values():
            if e.transmitted:
                e.sent_at = None
