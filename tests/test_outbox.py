"""The actor's outbox: sequence numbers, acks, re-sends and the counted spill policy."""

from __future__ import annotations

import pytest

from robotrl.distributed.outbox import Outbox


def _check_identity(ob: Outbox) -> None:
    assert ob.pushed_transitions == (
        ob.acked_transitions
        + ob.dropped_transitions
        + ob.rejected_transitions
        + ob.pending_transitions
    )


def test_seq_ack_and_floor():
    ob = Outbox(max_batches=8, max_bytes=1 << 20, max_in_flight=2)
    seqs = [ob.push(10, b"x" * 4) for _ in range(3)]
    assert seqs == [0, 1, 2] and ob.floor == 0 and ob.pending_bytes == 12
    due = ob.due(now=0.0, ack_timeout=1.0)
    assert [e.seq for e in due] == [0, 1]  # the send window holds two
    for e in due:
        ob.mark_sent(e, 0.0)
    assert ob.in_flight == 2 and ob.due(0.5, 1.0) == []
    assert ob.ack([1, 1, 99]) == 10  # duplicate and unknown acks are ignored
    assert ob.floor == 0 and [e.seq for e in ob.due(0.5, 1.0)] == [2]
    assert ob.ack([0]) == 10 and ob.floor == 2
    assert ob.reject(2) == 10 and ob.floor == 3 == ob.next_seq and len(ob) == 0
    _check_identity(ob)


def test_late_ack_and_requeue_resend():
    ob = Outbox(max_batches=8, max_bytes=1 << 20, max_in_flight=4)
    ob.push(5, b"a")
    (e,) = ob.due(0.0, 1.0)
    ob.mark_sent(e, 0.0)
    assert ob.due(0.9, 1.0) == [] and ob.due(1.0, 1.0) == [e]  # ack deadline passed
    ob.mark_sent(e, 1.0)
    assert ob.resent_batches == 1 and ob.in_flight == 1
    ob.requeue()  # reconnect: due at once
    assert ob.due(1.1, 1.0) == [e]


def test_overflow_drops_oldest_untransmitted_and_counts():
    ob = Outbox(max_batches=4, max_bytes=1 << 20, max_in_flight=2)
    for _ in range(2):
        ob.push(3, b"t")
    for e in ob.due(0.0, 1.0):
        ob.mark_sent(e, 0.0)  # seq 0, 1 in flight: maybe delivered already
    for _ in range(5):  # learner down: seq 2..6
        ob.push(3, b"n")
    assert len(ob) == 4
    kept = [e.seq for e in ob.due(10.0, 1.0)]  # overdue re-sends first, no room for new ones
    assert kept == [0, 1]
    assert ob.dropped_batches == 3 and ob.dropped_transitions == 9
    ob.requeue()
    assert ob.ack([0, 1]) == 6
    assert [e.seq for e in ob.due(10.0, 1.0)] == [5, 6]  # the newest two survived
    _check_identity(ob)


def test_byte_bound_and_oversized_batch():
    ob = Outbox(max_batches=100, max_bytes=10, max_in_flight=1)
    ob.push(1, b"12345")
    ob.push(1, b"12345")
    ob.push(1, b"123")  # 13 bytes > 10: the oldest goes
    assert ob.dropped_batches == 1 and ob.pending_bytes == 8 and ob.floor == 1
    ob.push(1, b"x" * 50)  # alone too big: everything untransmitted goes, itself included
    assert len(ob) == 0 and ob.dropped_transitions == 4
    _check_identity(ob)


def test_bounds_are_validated():
    with pytest.raises(ValueError, match="max_batches > max_in_flight"):
        Outbox(max_batches=4, max_bytes=10, max_in_flight=4)
