"""Store layout: key <-> disk names, array chunking and codecs, the root-attribute checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec

from robotrl.datasets.store_layout import (
    ARRAY_CODEC,
    FORMAT,
    IMAGE_CODEC,
    SCHEMA_VERSION,
    EpisodeStoreError,
    create_array,
    read_root_attrs,
    to_disk_name,
    to_key,
)


def test_disk_names_round_trip() -> None:
    assert to_disk_name("state/ee_pos") == "state.ee_pos"
    assert to_disk_name("images/front") == "images.front" and to_disk_name("action") == "action"
    for key in ("state/ee_pos", "images/wrist", "reward"):
        assert to_key(to_disk_name(key)) == key


def test_create_array_chunks_and_codecs(tmp_path: Path) -> None:
    group = zarr.create_group(str(tmp_path / "g"), zarr_format=3)
    img = create_array(group, "images.front", (16, 16, 3), np.uint8, 1, IMAGE_CODEC)
    state = create_array(group, "state.ee_pos", (3,), np.float32, 1024, None)
    text = create_array(group, "operator", (), str, 4096, None)
    assert img.shape == (0, 16, 16, 3) and img.chunks == (1, 16, 16, 3)
    assert state.shape == (0, 3) and state.chunks == (1024, 3) and state.dtype == np.float32
    for arr, codec in ((img, IMAGE_CODEC), (state, ARRAY_CODEC)):
        (got,) = arr.compressors
        assert (got.cname, got.clevel, got.shuffle) == (codec.cname, codec.clevel, codec.shuffle)
    assert img.compressors[0].shuffle != state.compressors[0].shuffle  # images: no byte shuffle
    # str arrays are left to zarr's default codec
    assert not any(isinstance(c, BloscCodec) for c in text.compressors)
    assert text.chunks == (4096,)
    state.resize((5, 3))
    state[:] = np.arange(15, dtype=np.float32).reshape(5, 3)
    # chunk keys use "." so each array is one flat directory of chunk files
    assert sorted(p.name for p in (tmp_path / "g" / "state.ee_pos").iterdir()) == [
        "c.0.0",
        "zarr.json",
    ]


def _root(tmp_path: Path, attrs: dict) -> Path:
    root = tmp_path / "s"
    zarr.create_group(str(root), zarr_format=3)
    doc = json.loads((root / "zarr.json").read_text())
    doc["attributes"] = attrs
    (root / "zarr.json").write_text(json.dumps(doc))
    return root


def test_read_root_attrs_checks_format_version_and_commit(tmp_path: Path) -> None:
    good = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "commit": {"num_episodes": 2, "num_steps": 30},
    }
    assert read_root_attrs(_root(tmp_path / "a", good))["commit"]["num_steps"] == 30
    with pytest.raises(EpisodeStoreError, match=r"schema_version 3 is not supported.*reads 1, 2"):
        read_root_attrs(_root(tmp_path / "b", {**good, "schema_version": 3}))
    with pytest.raises(EpisodeStoreError, match="commit record is missing or malformed"):
        read_root_attrs(_root(tmp_path / "c", {**good, "commit": {"num_episodes": 1}}))
    with pytest.raises(EpisodeStoreError, match="format='other'"):
        read_root_attrs(_root(tmp_path / "d", {**good, "format": "other"}))
    zarr.create_array(str(tmp_path / "arr"), shape=(2,), dtype="i4", zarr_format=3)
    with pytest.raises(EpisodeStoreError, match="expected a zarr v3 group"):
        read_root_attrs(tmp_path / "arr")


def test_a_file_is_not_taken_for_a_store(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("text")
    with pytest.raises(EpisodeStoreError, match=r"README\.md is a file, not an episode store"):
        read_root_attrs(tmp_path / "README.md")
