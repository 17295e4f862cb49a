"""store_diff: identical stores give no differences; each kind of difference is reported with
its size; wall-clock fields are ignored by default, compared on request."""

from __future__ import annotations

import numpy as np
import pytest

from robotrl.datasets import EpisodeStore
from robotrl.datasets.store_diff import diff_stores


def _store(path, *, ee_shift=0.0, reward=1.0, success=True, steps=(3, 2), operator="a"):
    store = EpisodeStore.create(path, fps=20.0, robot="panda_sim", durable=False)
    for n in steps:
        with store.begin_episode(operator=operator, task="t") as w:
            for k in range(n):
                obs = {"state/ee_pos": np.full(3, k + ee_shift, np.float32)}
                w.add(obs, np.zeros(7, np.float32), {"intervention": k == 0}, reward=reward)
            w.commit(success=success, final_obs={"state/ee_pos": np.ones(3, np.float32)})
    store.close()
    return EpisodeStore.open(path)


@pytest.mark.slow
def test_identical_and_different_stores(tmp_path):
    a = _store(tmp_path / "a")
    assert diff_stores(a, _store(tmp_path / "b")) == []  # timestamps differ, but are ignored
    assert diff_stores(a, a, ignore_keys=()) == []
    with_clock = diff_stores(a, _store(tmp_path / "b2"), ignore_keys=())
    assert len(with_clock) == 1 and with_clock[0].startswith("timestamp: max |a - b|")
    shifted = diff_stores(a, _store(tmp_path / "c", ee_shift=1e-6))
    assert len(shifted) == 1 and shifted[0].startswith("state/ee_pos: max |a - b| = 1e-06 over 5")
    assert diff_stores(a, _store(tmp_path / "d", ee_shift=1e-6), atol=1e-5) == []
    assert diff_stores(a, _store(tmp_path / "e", reward=0.5))[0].startswith("reward:")
    assert diff_stores(a, _store(tmp_path / "f", success=False)) == [
        "meta/success: 2 values differ"
    ]
    assert diff_stores(a, _store(tmp_path / "g", operator="b")) == [
        "meta/operator: 2 values differ"
    ]
    assert diff_stores(a, _store(tmp_path / "h", steps=(2, 3)))[0].startswith("episode_ends")
    assert diff_stores(a, _store(tmp_path / "i", steps=(3,))) == ["episodes: 2 vs 1"]
