"""LearnerService without Ray: acknowledgement, de-duplication, refusal of bad input and stale
epochs, the publication cadence and checkpoint/resume, on a clock the test sets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robotrl.distributed.learner_service import LearnerService
from robotrl.distributed.transitions import encode_arrays, flatten_transition, stack


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Counting:
    """A learner that keeps every batch and owes one update per transition."""

    def __init__(self, fail: int = 0) -> None:
        self.batches: list = []
        self.owed = 0
        self.updates = 0
        self.fail = fail  # on_transitions raises this many times first

    def on_transitions(self, batch) -> None:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("replay full")
        self.batches.append(batch)
        self.owed += len(batch)

    @property
    def ready(self) -> bool:
        return self.updates > 0

    def work(self, max_updates: int = 4) -> int:
        n = min(max_updates, self.owed)
        self.owed -= n
        self.updates += n
        return n

    def state_dict(self) -> dict:
        return {"w": np.full(2, self.updates, np.float32)}

    def save(self, directory: Path, version: int, meta: dict) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "state.json").write_text(json.dumps([self.updates, version]))

    def resume(self, directory: Path) -> int | None:
        path = directory / "state.json"
        if not path.is_file():
            return None
        self.updates, version = json.loads(path.read_text())
        return int(version)


def _payload(values: list[int], width: int = 3) -> bytes:
    rows = [
        flatten_transition(
            {"x": np.full(width, i, np.float32)},
            np.zeros(2, np.float32),
            float(i),
            {"x": np.full(width, i + 1, np.float32)},
            False,
            False,
        )
        for i in values
    ]
    return encode_arrays(stack(rows))


def _service(learner: Counting | None = None, **kw) -> tuple[LearnerService, Counting, Clock]:
    ln, clock = learner or Counting(), Clock()
    svc = LearnerService(lambda: ln, run=False, threads=None, clock=clock, **kw)
    return svc, ln, clock


def test_a_batch_is_delivered_once_and_a_resend_is_acknowledged_again():
    svc, ln, _ = _service()
    assert svc.push("a0", 1, 0, 0, _payload([0, 1])) == ("ack", "")
    assert svc.push("a0", 1, 0, 0, _payload([0, 1])) == ("ack", "")  # reply was lost
    assert svc.push("a0", 1, 1, 1, _payload([2])) == ("ack", "")
    assert svc.push("a0", 1, 2, 0, _payload([0, 1])) == ("ack", "")  # below the floor
    assert [b.seq for b in ln.batches] == [0, 1]
    np.testing.assert_array_equal(ln.batches[0].obs["x"][:, 0], [0, 1])
    s = svc.stats()
    assert (s.received, s.delivered, s.delivered_batches, s.duplicates) == (4, 3, 2, 2)
    assert svc.actors()["a0"].delivered_transitions == 3


def test_malformed_and_mismatched_batches_are_refused_for_good():
    svc, ln, _ = _service()
    status, reason = svc.push("a0", 1, 0, 0, b"not a batch")
    assert status == "reject" and "batch 0" in reason
    svc.push("a0", 1, 0, 1, _payload([0]))
    status, reason = svc.push("a0", 1, 0, 2, _payload([0], width=4))  # another schema
    assert status == "reject" and "x" in reason
    assert len(ln.batches) == 1 and svc.stats().rejected == 2
    assert svc.stats().last_error == reason


def test_an_older_epoch_of_an_actor_id_is_refused_and_a_newer_one_replaces_it():
    svc, ln, _ = _service()
    svc.push("a0", 5, 0, 0, _payload([0]))
    status, reason = svc.push("a0", 4, 0, 1, _payload([1]))
    assert status == "reject" and "second process" in reason
    assert svc.push("a0", 6, 0, 0, _payload([2])) == ("ack", "")  # restarted: seq 0 again
    assert [int(b.obs["x"][0, 0]) for b in ln.batches] == [0, 2]
    assert svc.actors()["a0"].epoch == 6


def test_a_failing_learner_leaves_the_batch_unacknowledged_until_it_takes_it():
    svc, ln, _ = _service(Counting(fail=1))
    with pytest.raises(RuntimeError, match="replay full"):
        svc.push("a0", 1, 0, 0, _payload([0]))
    assert svc.stats().delivered == 0
    assert svc.push("a0", 1, 0, 0, _payload([0])) == ("ack", "")
    assert len(ln.batches) == 1


def test_weights_are_published_every_n_updates_or_s_seconds_and_not_when_idle():
    svc, _, clock = _service(publish_every_updates=8, publish_every_s=1.0)
    assert svc.weights(None) is None  # not ready: nothing to publish
    svc.push("a0", 1, 0, 0, _payload(list(range(20))))
    svc.step()  # 4 updates: ready, first publication
    session, version, _, state = svc.weights(None)
    assert version == 0 and state["w"][0] == 4
    assert svc.weights((session, 0)) is None  # the caller holds the newest
    svc.step()  # 8 updates: 4 since the publication, before the period
    assert svc.weights((session, 0)) is None
    svc.step()  # 8 since: published
    assert svc.weights((session, 0))[1] == 1
    svc.step()  # 4 more updates, then time passes
    clock.now = 1.5
    svc.step()
    assert svc.weights((session, 1))[1] == 2
    clock.now = 10.0
    assert svc.step() == 0 and svc.weights((session, 2)) is None  # idle: nothing new


def test_checkpoints_at_publications_and_a_new_service_resumes_and_publishes_at_once(tmp_path):
    svc, _, clock = _service(
        state_dir=tmp_path, publish_every_updates=4, checkpoint_every_s=5.0, meta={"k": 1}
    )
    svc.push("a0", 1, 0, 0, _payload(list(range(12))))
    svc.step()
    assert not (tmp_path / "state.json").exists()  # first publication, before the period
    clock.now = 6.0
    svc.step()
    assert json.loads((tmp_path / "state.json").read_text()) == [8, 1]
    out = svc.shutdown()  # final checkpoint
    assert out["version"] == 1 and out["delivered"] == 12
    again, ln2, _ = _service(state_dir=tmp_path)
    assert again.resumed_version == 1 and ln2.updates == 8
    session, version, _, state = again.weights(None)
    assert version == 2 and state["w"][0] == 8 and session != svc.session
