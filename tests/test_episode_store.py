"""EpisodeStore: round trips, metadata, diffusion_policy-style reading, crash safety, the commit
protocol under disk-full and Ctrl-C, verify / repair of dangling rows and foreign stores."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np
import pytest
import zarr

from robotrl.datasets import EpisodeStore, EpisodeStoreError, repair, verify
from robotrl.datasets import episode_store as es_mod
from robotrl.datasets.durable_store import DurableLocalStore

FPS = 20.0


def make_episode(e: int) -> dict:
    """Deterministic random episode ``e`` (the same in the test and the recording child)."""
    rng = np.random.default_rng(1000 + e)
    n = int(rng.integers(3, 40))
    return {
        "obs": {
            "state/ee_pos": rng.standard_normal((n, 3)).astype(np.float32),
            "state/gripper": rng.standard_normal((n, 1)).astype(np.float32),
            "images/front": rng.integers(0, 256, (n, 16, 16, 3), dtype=np.uint8),
        },
        "action": rng.uniform(-1, 1, (n, 7)).astype(np.float32),
        "intervention": rng.random(n) < 0.3,
        "reward": rng.standard_normal(n).astype(np.float32),
        "final": {
            "state/ee_pos": rng.standard_normal(3).astype(np.float32),
            "state/gripper": rng.standard_normal(1).astype(np.float32),
            "images/front": rng.integers(0, 256, (16, 16, 3), dtype=np.uint8),
        },
        "success": bool(e % 2),
        "operator": f"op{e}",
    }


def record(store: EpisodeStore, e: int, say: Callable[[str], None] | None = None) -> int:
    """Record episode ``e``; ``say`` hears "step" after each step and "committing" before the
    commit (the recording child reports its progress with it)."""
    ep = make_episode(e)
    with store.begin_episode(operator=ep["operator"], task="lift", language=f"lang {e}") as w:
        for t in range(len(ep["action"])):
            obs = {k: v[t] for k, v in ep["obs"].items()}
            info = {"intervention": bool(ep["intervention"][t]), "success": False}
            w.add(obs, ep["action"][t], info, reward=ep["reward"][t], timestamp=t / FPS)
            if say is not None:
                say("step")
        if say is not None:
            say("committing")
        return w.commit(success=ep["success"], terminated=e % 3 == 0, final_obs=ep["final"])


def assert_episode_equal(store: EpisodeStore, i: int) -> None:
    ep, got = make_episode(i), store.episode(i)
    for k, v in ep["obs"].items():
        assert got[k].dtype == v.dtype and np.array_equal(got[k], v), k
        assert np.array_equal(got["final_obs"][k], ep["final"][k]), k
    for k in ("action", "intervention", "reward"):
        assert np.array_equal(got[k], ep[k]), k
    assert np.array_equal(got["timestamp"], np.arange(len(ep["action"])) / FPS)
    assert got["success"] == ep["success"] and got["operator"] == ep["operator"]
    assert got["language"] == f"lang {i}" and got["task"] == "lift"
    assert got["terminated"] == (i % 3 == 0) and got["final_obs_valid"]
    assert got["intervention_steps"] == int(ep["intervention"].sum())


@pytest.fixture
def store(tmp_path: Path) -> EpisodeStore:
    s = EpisodeStore.create(tmp_path / "ds.zarr", fps=FPS, robot="panda", action_space={"dim": 7})
    yield s
    s.close()


def test_round_trip_and_metadata(store: EpisodeStore) -> None:
    for e in range(4):
        assert record(store, e) == e
    lengths = [len(make_episode(e)["action"]) for e in range(4)]
    assert store.num_episodes == 4 and store.num_steps == sum(lengths)
    assert store.episode_ends.dtype == np.int64
    assert np.array_equal(store.episode_ends, np.cumsum(lengths))
    for e in range(4):
        assert_episode_equal(store, e)
    # negative index, get() with a slice and with an index array
    assert store.episode(-1)["episode_index"] == 3
    sl = store.episode_slice(2)
    assert np.array_equal(store.get("action", sl), make_episode(2)["action"])
    rows = np.array([0, store.num_steps - 1])
    assert np.array_equal(store.get("action", rows), store.get("action")[rows])
    store.close()
    reopened = EpisodeStore.open(store.path)
    assert reopened.attrs["fps"] == FPS and reopened.attrs["robot"] == "panda"
    assert reopened.attrs["action_space"] == {"dim": 7}
    assert reopened.attrs["schema_version"] == es_mod.SCHEMA_VERSION
    assert np.array_equal(reopened.meta("success"), [False, True, False, True])
    assert_episode_equal(reopened, 1)
    assert verify(store.path)["clean"]


def test_episodes_reads_what_episode_reads(store: EpisodeStore) -> None:
    for e in range(4):
        record(store, e)

    def same(a: dict, b: dict) -> None:
        assert a.keys() == b.keys()
        for k, v in a.items():
            if k == "final_obs":
                assert v.keys() == b[k].keys()
                assert all(np.array_equal(v[f], b[k][f]) for f in v)
            elif isinstance(v, np.ndarray):
                assert v.dtype == b[k].dtype and np.array_equal(v, b[k]), k
            else:
                assert v == b[k], k

    for a, i in zip(store.episodes(), range(4), strict=True):
        same(a, store.episode(i))
    picked = list(store.episodes([2, -1], keys=["action"]))
    assert [ep["episode_index"] for ep in picked] == [2, 3]
    same(picked[0], store.episode(2, keys=["action"]))
    assert list(store.episodes([])) == []
    with pytest.raises(IndexError, match="episode 4 out of range"):
        next(store.episodes([0, 4]))


def test_diffusion_policy_style_reader(store: EpisodeStore) -> None:
    """A plain zarr reader sees data/<key> concatenated over time and meta/episode_ends."""
    for e in range(3):
        record(store, e)
    root = zarr.open_group(store.path, mode="r")
    ends = root["meta"]["episode_ends"][:]
    assert np.array_equal(ends, store.episode_ends)
    assert set(root["data"].array_keys()) >= {"state.ee_pos", "images.front", "action"}
    for name, arr in root["data"].arrays():
        assert arr.shape[0] == ends[-1], name
    front = root["data"]["images.front"]
    assert front.chunks == (1, 16, 16, 3)
    assert np.array_equal(front[ends[0] : ends[1]], make_episode(1)["obs"]["images/front"])


def test_single_writer(store: EpisodeStore) -> None:
    with pytest.raises(EpisodeStoreError, match="another process"):
        EpisodeStore.open(store.path, mode="a")
    with pytest.raises(EpisodeStoreError, match="read-only"):
        EpisodeStore.open(store.path, mode="r").begin_episode()


@pytest.mark.slow
def test_sigkill_while_recording(tmp_path: Path) -> None:
    """Kill -9 a recording process at random moments; every committed episode survives."""
    path = tmp_path / "crash.zarr"
    rng = np.random.default_rng(0)
    committed_before = 0
    for _ in range(5):
        child = subprocess.Popen(
            [sys.executable, __file__, str(path)],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"ready"
        need = int(rng.integers(1, 3))  # commits to see before the kill: none is left to luck
        read_until_commits(child.stdout, need)
        # then the kill point, by the child's own reports: k steps into the next episode, or
        # its commit when the episode is shorter
        k = int(rng.integers(1, 40))
        for line in iter(child.stdout.readline, b""):
            k -= line.strip() == b"step"
            if k == 0 or line.strip() == b"committing":
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
        with EpisodeStore.open(path) as s:  # read-only open after the crash works
            assert s.num_episodes >= committed_before + need  # every reported commit survived
            committed_before = s.num_episodes
    with EpisodeStore.open(path, mode="a") as s:  # repairs
        n = s.num_episodes
        assert n > 0
        for e in range(n):
            assert_episode_equal(s, e)
    report = verify(path)
    assert report["clean"], report


def read_until_commits(stdout: IO[bytes], need: int) -> None:
    """Read the recording child's reports until it has reported ``need`` commits."""
    seen = 0
    for line in iter(stdout.readline, b""):
        seen += line.strip() == b"committed"
        if seen == need:
            return
    raise AssertionError("the recording child stopped before its commits")


def _record_forever(path: str) -> None:
    store = EpisodeStore.create(path, fps=FPS, robot="panda", exist_ok=True)
    print("ready", flush=True)
    while True:
        record(store, store.num_episodes, say=lambda word: print(word, flush=True))
        print("committed", flush=True)  # after the commit returned: durable


if __name__ == "__main__":
    _record_forever(sys.argv[1])


# ---- the commit protocol


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


# ---- verify and repair


def test_crash_before_commit_point_is_repaired(
    store: EpisodeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every array written, the commit record not: as if killed just before publishing."""
    record(store, 0)

    def die(*a):  # type: ignore[no-untyped-def]
        raise SystemExit("killed")

    monkeypatch.setattr("robotrl.datasets.episode_store.write_root_attrs", die)
    monkeypatch.setattr("robotrl.datasets.episode_store.truncate_to_commit", lambda s: [])
    (store.path / "data" / "action" / "c.9.0.abc.partial").write_bytes(b"junk")
    with pytest.raises(SystemExit):
        record(store, 1)
    monkeypatch.undo()
    store.close()
    report = verify(store.path)
    assert report["ok"] and not report["clean"]
    assert any("beyond the commit record" in w for w in report["warnings"])
    with EpisodeStore.open(store.path, mode="r") as s:  # readers see only committed rows
        assert s.num_episodes == 1 and len(s.get("action")) == len(make_episode(0)["action"])
    fixed = repair(store.path)
    assert fixed["actions"] and fixed["verify"]["clean"], fixed
    with EpisodeStore.open(store.path, mode="a") as s:
        assert_episode_equal(s, 0)
        record(s, 1)
        assert_episode_equal(s, 1)


def test_foreign_and_corrupt_directories(tmp_path: Path) -> None:
    with pytest.raises(EpisodeStoreError, match="no such directory"):
        EpisodeStore.open(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EpisodeStoreError, match=r"no zarr\.json"):
        EpisodeStore.open(tmp_path / "empty")
    zarr.create_group(str(tmp_path / "foreign"), zarr_format=3)
    with pytest.raises(EpisodeStoreError, match="not a robotrl episode store"):
        EpisodeStore.open(tmp_path / "foreign")
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "zarr.json").write_text("{not json")
    with pytest.raises(EpisodeStoreError, match="not JSON"):
        EpisodeStore.open(tmp_path / "garbage")
    assert not verify(tmp_path / "foreign")["ok"]

    s = EpisodeStore.create(tmp_path / "ds", fps=FPS, robot="panda")
    record(s, 0)
    s.close()
    with pytest.raises(EpisodeStoreError, match="already exists"):
        EpisodeStore.create(tmp_path / "ds", fps=FPS, robot="panda")
    # damage committed data: a truncated chunk and a missing array
    chunk = tmp_path / "ds" / "data" / "images.front" / "c.0.0.0.0"
    chunk.write_bytes(chunk.read_bytes()[:10])
    report = verify(tmp_path / "ds")
    assert not report["ok"] and any("cannot be decoded" in e for e in report["errors"])
    import shutil

    shutil.rmtree(tmp_path / "ds" / "data" / "action")
    with pytest.raises(EpisodeStoreError, match=r"data/action/zarr\.json is missing"):
        EpisodeStore.open(tmp_path / "ds", mode="a")
    doc = json.loads((tmp_path / "ds" / "zarr.json").read_text())
    doc["attributes"]["schema_version"] = 99
    (tmp_path / "ds" / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(EpisodeStoreError, match="schema_version"):
        EpisodeStore.open(tmp_path / "ds")
