"""Durable store primitives: written-file tracking, the atomic root-attribute replace, the
single-writer lock."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from robotrl.datasets.durable_store import DurableLocalStore, lock_writer, write_root_attrs
from robotrl.datasets.store_layout import EpisodeStoreError


def test_sync_fsyncs_every_written_file_and_forgets_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zs = DurableLocalStore(tmp_path / "z")
    group = zarr.create_group(store=zs, zarr_format=3)
    arr = group.create_array("a", shape=(4,), chunks=(2,), dtype="f8")
    arr[:] = np.arange(4.0)
    written = {p.relative_to(zs.root).as_posix() for p in zs.dirty}
    assert written == {"zarr.json", "a/zarr.json", "a/c/0", "a/c/1"}
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")))
    zs.sync()
    monkeypatch.setattr(os, "fsync", real_fsync)
    rel = sorted(os.path.relpath(p, zs.root) for p in synced)
    # the 4 files, then their directories up to the store root: a/c, a and the root itself
    assert rel == sorted([".", "a", "a/c", "a/c/0", "a/c/1", "a/zarr.json", "zarr.json"])
    assert not zs.dirty


def test_write_root_attrs_replaces_attributes_only(tmp_path: Path) -> None:
    root = tmp_path / "s"
    zarr.create_group(str(root), zarr_format=3, attributes={"old": 1})
    write_root_attrs(root, {"commit": {"num_episodes": 3}})
    doc = json.loads((root / "zarr.json").read_text())
    assert doc["attributes"] == {"commit": {"num_episodes": 3}}
    assert doc["zarr_format"] == 3 and doc["node_type"] == "group"
    assert sorted(p.name for p in root.iterdir()) == ["zarr.json"]  # no .partial left


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    fd = lock_writer(tmp_path)
    with pytest.raises(EpisodeStoreError, match="open for writing by another process"):
        lock_writer(tmp_path)
    os.close(fd)
    os.close(lock_writer(tmp_path))  # released with its fd
