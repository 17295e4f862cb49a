"""Commit protocol: a disk-full or Ctrl-C failure mid-commit keeps every earlier episode."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_episode_store import FPS, assert_episode_equal, make_episode, record

from robotrl.datasets import EpisodeStore, EpisodeStoreError, verify
from robotrl.datasets.durable_store import DurableLocalStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EpisodeStore]:
    s = EpisodeStore.create(tmp_path / "ds.zarr", fps=FPS, robot="panda", action_space={"dim": 7})
    yield s
    s.close()


def _fail_nth_set(monkeypatch: pytest.MonkeyPatch, n: int, exc: BaseException) -> None:
    calls = {"n": 0}
    original = DurableLocalStore._set

    async def failing(self, key, value, exclusive=False):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == n:
            raise exc
        await original(self, key, value, exclusive=exclusive)

    monkeypatch.setattr(DurableLocalStore, "_set", failing)


@pytest.mark.parametrize("nth", [1, 7, 25])
def test_disk_full_during_commit_keeps_earlier_episodes(
    store: EpisodeStore, monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    for e in range(2):
        record(store, e)
    ep = make_episode(2)
    w = store.begin_episode(operator=ep["operator"], task="lift", language="lang 2")
    for t in range(len(ep["action"])):
        obs = {k: v[t] for k, v in ep["obs"].items()}
        w.add(obs, ep["action"][t], {"intervention": bool(ep["intervention"][t])},
              reward=ep["reward"][t], timestamp=t / FPS)  # fmt: skip
    _fail_nth_set(monkeypatch, nth, OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(EpisodeStoreError, match="No space left"):
        w.commit(success=ep["success"], terminated=False, final_obs=ep["final"])
    assert store.num_episodes == 2
    monkeypatch.undo()
    report = verify(store.path)
    assert report["ok"], report
    for e in range(2):
        assert_episode_equal(store, e)
    # the buffer survives a failed commit: free space and retry
    assert w.commit(success=ep["success"], terminated=False, final_obs=ep["final"]) == 2
    assert_episode_equal(store, 2)
    assert verify(store.path)["clean"]


def test_ctrl_c_during_commit(store: EpisodeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    record(store, 0)

    def interrupt(self):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(DurableLocalStore, "sync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        record(store, 1)
    monkeypatch.undo()
    assert store.num_episodes == 1
    store.close()
    with EpisodeStore.open(store.path, mode="a") as s:
        assert s.num_episodes == 1
        assert_episode_equal(s, 0)
        record(s, 1)
    assert verify(store.path)["clean"]
