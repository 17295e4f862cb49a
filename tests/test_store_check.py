"""verify / repair: dangling rows after a crash, damaged and foreign stores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import zarr
from test_episode_store import FPS, assert_episode_equal, make_episode, record

from robotrl.datasets import EpisodeStore, EpisodeStoreError, repair, verify


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EpisodeStore]:
    s = EpisodeStore.create(tmp_path / "ds.zarr", fps=FPS, robot="panda")
    yield s
    s.close()


def test_crash_before_commit_point_is_repaired(
    store: EpisodeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every array written, the commit record not: as if killed just before publishing."""
    record(store, 0)

    def die(*a):  # type: ignore[no-untyped-def]
        raise SystemExit("killed")

    monkeypatch.setattr("robotrl.datasets.store_commit.write_root_attrs", die)
    monkeypatch.setattr("robotrl.datasets.store_check.truncate_to_commit", lambda s: [])
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
