"""EpisodeWriter: buffering, validation, discard on exception."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from test_episode_store import FPS, assert_episode_equal, make_episode, record

from robotrl.datasets import EpisodeStore, EpisodeStoreError, verify


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EpisodeStore]:
    s = EpisodeStore.create(tmp_path / "ds.zarr", fps=FPS, robot="panda")
    yield s
    s.close()


def test_exception_while_recording_discards_only_that_episode(store: EpisodeStore) -> None:
    record(store, 0)
    for exc in (KeyboardInterrupt, RuntimeError):
        with pytest.raises(exc), store.begin_episode() as w:
            ep = make_episode(1)
            w.add({k: v[0] for k, v in ep["obs"].items()}, ep["action"][0])
            raise exc
    assert store.num_episodes == 1
    record(store, 1)
    assert store.num_episodes == 2 and verify(store.path)["clean"]
    assert_episode_equal(store, 1)


def test_schema_mismatch_rejected(store: EpisodeStore) -> None:
    record(store, 0)
    with store.begin_episode() as w:
        with pytest.raises(EpisodeStoreError, match="differ"):
            w.add({"state/ee_pos": np.zeros(3, np.float32)}, np.zeros(7, np.float32))
        ep = make_episode(0)
        obs = {k: v[0] for k, v in ep["obs"].items()}
        with pytest.raises(EpisodeStoreError, match="expected shape"):
            w.add(obs, np.zeros(6, np.float32))
        with pytest.raises(EpisodeStoreError, match="empty"):
            w.commit(success=True)
        w.discard()
