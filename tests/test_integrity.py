"""Content integrity: every kind of damage to a recorded store is found, named, and refused by
the commands that read it; exclude_damaged trains on the rest."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tiny_reach import reach_demos

from robotrl.cli import main
from robotrl.datasets import EpisodeStore, repair, verify
from robotrl.datasets.integrity import (
    DamagedStoreError,
    content_damage,
    intact_episodes,
    structure_damage,
)

CHUNK_ROWS = 32  # small chunks so a store of a few reach episodes spans several action chunks


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("integrity")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("robotrl.datasets.episode_store.STATE_CHUNK_ROWS", CHUNK_ROWS)
        return reach_demos(root, episodes=6)


@pytest.fixture
def store_path(demos: Path, tmp_path: Path) -> Path:
    path = tmp_path / "copy.zarr"
    shutil.copytree(demos, path)
    return path


def _episodes_in_chunk(path: Path, chunk: int) -> set[int]:
    with EpisodeStore.open(path) as s:
        ends = s.episode_ends
    starts = np.concatenate([[0], ends[:-1]])
    lo, hi = chunk * CHUNK_ROWS, (chunk + 1) * CHUNK_ROWS
    return {int(i) for i in np.flatnonzero((starts < hi) & (ends > lo))}


def _delete(path: Path) -> None:
    (path / "data/action/c.1.0").unlink()


def _flip(path: Path) -> None:
    chunk = path / "data/action/c.1.0"
    raw = bytearray(chunk.read_bytes())
    mid = len(raw) // 2
    raw[mid : mid + 40] = bytes(b ^ 0xFF for b in raw[mid : mid + 40])
    chunk.write_bytes(bytes(raw))


def _truncate(path: Path) -> None:
    chunk = path / "data/action/c.1.0"
    chunk.write_bytes(chunk.read_bytes()[: len(chunk.read_bytes()) // 3])


def _truncate_metadata(path: Path) -> None:
    meta = path / "data/action/zarr.json"
    meta.write_text(meta.read_text()[:120])


def _empty_meta_chunk(path: Path) -> None:
    (path / "meta/success/c.0").write_bytes(b"")


def _foreign_chunk(path: Path) -> None:
    # same shape and dtype (7 floats a row): decodes fine, holds another array's values
    shutil.copy(path / "data/state.joint_pos/c.1.0", path / "data/action/c.1.0")


DAMAGE: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "deleted chunk": (_delete, "data/action/c.1.0", "is missing"),
    "flipped bytes": (_flip, "data/action/c.1.0", ""),
    "truncated chunk": (_truncate, "data/action/c.1.0", "cannot be decoded"),
    "truncated metadata": (_truncate_metadata, "data/action/zarr.json", "is unreadable"),
    "emptied metadata chunk": (_empty_meta_chunk, "meta/success/c.0", "cannot be decoded"),
    "chunk from another array": (_foreign_chunk, "data/action/c.1.0", "differs from its checksum"),
}


def test_a_fresh_store_is_intact_and_every_chunk_is_on_disk(store_path: Path) -> None:
    report = verify(store_path)
    assert report["ok"] and report["clean"] and report["damaged_episodes"] == 0, report
    with EpisodeStore.open(store_path) as s:
        assert s.array("action").shape[0] > 3 * CHUNK_ROWS
        assert intact_episodes(s).all()
        keys = s.attrs["keys"]
    # every chunk is on disk, those holding only fill values (zero rewards, ...) too
    for name in keys:
        chunks = [p for p in (store_path / "data" / name).iterdir() if p.name != "zarr.json"]
        assert len(chunks) == 4, name


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damage_is_found_named_and_refused(kind: str, store_path: Path, capsys) -> None:
    damage, file, problem = DAMAGE[kind]
    hit = _episodes_in_chunk(store_path, 1)
    damage(store_path)

    report = verify(store_path)
    assert not report["ok"]
    assert any(file in e and problem in e for e in report["errors"]), report["errors"]
    if file.endswith("c.1.0"):
        named = [d for d in report["damage"] if d["file"] == file]
        assert named and set(named[0]["episodes"]) <= hit, report["damage"]

    assert main(["dataset", "verify", f"path={store_path}", "progress=false"]) == 1
    capsys.readouterr()
    if kind in ("deleted chunk", "truncated metadata", "emptied metadata chunk"):  # info sees it
        assert main(["dataset", "info", str(store_path)]) == 1
        info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert any(file in d for d in info["damage"]), info
    args = [f"dataset={store_path}", "steps=2", "batch_size=8", "eval_episodes=0", "hidden=16"]
    code = main(["train-bc", *args, f"output_dir={store_path.parent}", "progress=false"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and file in err[0] and "damaged" in err[0], err


def test_a_missing_chunk_never_reads_as_zeros(store_path: Path) -> None:
    _delete(store_path)
    with pytest.raises(DamagedStoreError, match=r"data/action/c\.1\.0 is missing"):
        EpisodeStore.open(store_path)
    with pytest.raises(DamagedStoreError):
        EpisodeStore.open(store_path, mode="a")  # no appending to a damaged store
    with EpisodeStore.open(store_path, check=False) as s:
        assert [d.file for d in structure_damage(s)] == ["data/action/c.1.0"]
    # named once: the zeros zarr would read there also fail the checksum, not reported twice
    assert len(verify(store_path)["errors"]) == 1


def test_flipped_bytes_are_found_by_the_content_check_only(store_path: Path) -> None:
    _flip(store_path)
    with EpisodeStore.open(store_path) as s:  # the structure is fine
        assert not structure_damage(s)
        found = content_damage(s, ["action"])
        assert found and all(d.file == "data/action/c.1.0" for d in found), found
        assert not content_damage(s, ["state/ee_pos"])  # other keys are intact


@pytest.mark.slow
def test_exclude_damaged_trains_on_the_intact_episodes(store_path: Path, capsys) -> None:
    hit = _episodes_in_chunk(store_path, 1)
    _truncate(store_path)
    with EpisodeStore.open(store_path, check=False) as s:
        mask = intact_episodes(s, ["action"], exclude_damaged=True)
        assert set(np.flatnonzero(~mask)) == hit
    args = [f"dataset={store_path}", "steps=2", "batch_size=8", "eval_episodes=0", "hidden=16"]
    code = main(
        [
            "train-bc",
            *args,
            "exclude_damaged=true",
            f"output_dir={store_path.parent}",
            "progress=false",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    summary = json.loads(out.out.strip().splitlines()[-1])
    assert summary["excluded_episodes"] == len(hit)
    assert f"left out {len(hit)} damaged episodes" in out.err


def test_repair_says_what_it_cannot_recover_and_changes_nothing(store_path: Path) -> None:
    _delete(store_path)
    before = sorted(p.name for p in (store_path / "data/action").iterdir())
    report = repair(store_path)
    assert report["cannot_recover"] and not report["actions"]
    assert "data/action/c.1.0 is missing" in report["cannot_recover"][0]
    assert sorted(p.name for p in (store_path / "data/action").iterdir()) == before


def test_a_store_without_checksums_is_sealed_by_repair(store_path: Path) -> None:
    """Stores written before checksums (schema 1) still open; repair adds checksums."""
    doc = json.loads((store_path / "zarr.json").read_text())
    attrs = doc["attributes"]
    attrs["schema_version"] = 1
    del attrs["checksums"], attrs["commit"]["chain"]
    (store_path / "zarr.json").write_text(json.dumps(doc))
    shutil.rmtree(store_path / "meta/checksums")
    report = verify(store_path)
    assert report["ok"] and any("without checksums" in w for w in report["warnings"])
    fixed = repair(store_path)
    assert any("added checksums of 6 episodes" in a for a in fixed["actions"]), fixed
    assert fixed["verify"]["clean"], fixed["verify"]
    _flip(store_path)  # from now on, content damage is found
    assert not verify(store_path)["ok"]


def test_a_substituted_checksum_row_breaks_the_chain(store_path: Path) -> None:
    with EpisodeStore.open(store_path) as s:
        sums = s._meta_array("checksums")[:]
    import zarr

    arr = zarr.open_array(str(store_path / "meta/checksums"), mode="r+")
    sums[2, 0] ^= np.uint64(1)
    arr[:] = sums
    with pytest.raises(DamagedStoreError, match="checksum chain"):
        EpisodeStore.open(store_path)
