"""Learner records: an actor's settled floor prunes its delivery records."""

import dataclasses

import pytest

from robotrl.distributed.learner_records import ActorInfo, LearnerStats, PeerRecord


def test_advance_forgets_settled_seqs_and_never_moves_back() -> None:
    peer = PeerRecord(epoch=1, delivered={0, 1, 2, 5})
    peer.advance(2)
    assert peer.floor == 2 and peer.delivered == {2, 5}
    peer.advance(1)  # an older floor (a reordered push) changes nothing
    assert peer.floor == 2 and peer.delivered == {2, 5}


def test_snapshots_are_immutable() -> None:
    info = ActorInfo("a0", 1, 0.0, 3, 192)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.epoch = 2  # type: ignore[misc]
    stats = LearnerStats(1, 64, 1, 0, 0, 10, 2, "s", 1, "")
    assert stats.delivered == 64 and dataclasses.replace(stats, rejected=3).rejected == 3
