"""Sequence windows, padding, split, normalisation stats and the torch dataset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from robotrl.datasets import EpisodeStore
from robotrl.datasets.sampler import (
    SequenceDataset,
    compute_stats,
    make_dataloader,
    split_episodes,
    window_indices,
)


@pytest.fixture
def tiny(tmp_path: Path) -> EpisodeStore:
    """Episodes of 3 and 2 steps; every value encodes its global row r."""
    store = EpisodeStore.create(tmp_path / "tiny", fps=20, robot="panda")
    row = 0
    for length in (3, 2):
        with store.begin_episode() as w:
            for _ in range(length):
                obs = {
                    "state/x": np.array([row, 10 * row], np.float32),
                    "images/cam": np.full((2, 2, 3), row, np.uint8),
                }
                w.add(obs, np.full(7, row, np.float32))
                row += 1
            w.commit(success=True)
    return store


def test_window_indices_exact() -> None:
    obs_idx, act_idx = window_indices(np.array([3, 5]), 2, 3, np.array([True, True]))
    assert obs_idx.tolist() == [[0, 0], [0, 1], [1, 2], [3, 3], [3, 4]]
    assert act_idx.tolist() == [[0, 1, 2], [1, 2, 2], [2, 2, 2], [3, 4, 4], [4, 4, 4]]
    obs_idx, act_idx = window_indices(np.array([3, 5]), 1, 1, np.array([False, True]))
    assert obs_idx.tolist() == [[3], [4]] and act_idx.tolist() == [[3], [4]]
    with pytest.raises(ValueError):
        window_indices(np.array([3]), 0, 1, np.array([True]))


@pytest.mark.parametrize("cache_bytes", [1 << 30, 0])
def test_dataset_windows_and_padding(tiny: EpisodeStore, cache_bytes: int) -> None:
    ds = SequenceDataset(tiny, ["state/x", "images/cam"], 2, 3, cache_bytes=cache_bytes)
    assert ds.cached == (cache_bytes > 0)
    assert len(ds) == 5
    item = ds[1]
    assert item["obs"]["state/x"].dtype == torch.float32
    assert item["obs"]["state/x"][:, 0].tolist() == [0, 1]
    assert item["obs"]["state/x"][:, 1].tolist() == [0, 10]
    assert item["obs"]["images/cam"].shape == (2, 2, 2, 3)
    assert item["obs"]["images/cam"].dtype == torch.uint8
    assert item["obs"]["images/cam"][:, 0, 0, 0].tolist() == [0, 1]
    assert item["action"].shape == (3, 7) and item["action"][:, 0].tolist() == [1, 2, 2]
    batch = ds[[3, 4, 0]]
    assert batch["obs"]["state/x"][:, :, 0].tolist() == [[3, 3], [3, 4], [0, 0]]
    assert batch["action"][:, :, 3].tolist() == [[3, 4, 4], [4, 4, 4], [0, 1, 2]]
    assert batch["episode"].tolist() == [1, 1, 0]


def test_dataloader_covers_every_window(tiny: EpisodeStore) -> None:
    ds = SequenceDataset(tiny, ["state/x"], 2, 3)
    loader = make_dataloader(ds, batch_size=2, shuffle=True, drop_last=False, seed=3)
    seen = torch.cat([b["obs"]["state/x"][:, -1, 0] for b in loader])
    assert sorted(seen.tolist()) == [0, 1, 2, 3, 4]
    again = torch.cat([b["obs"]["state/x"][:, -1, 0] for b in make_dataloader(
        ds, batch_size=2, shuffle=True, drop_last=False, seed=3)])  # fmt: skip
    assert torch.equal(seen, again)


def test_split_disjoint_by_episode(tiny: EpisodeStore) -> None:
    train, val = split_episodes(10, 0.3, seed=1)
    assert not np.any(train & val) and np.all(train | val) and val.sum() == 3
    assert np.array_equal(split_episodes(10, 0.3, seed=1)[1], val)
    assert not np.array_equal(split_episodes(10, 0.3, seed=2)[1], val)
    assert split_episodes(2, 0.01)[1].sum() == 1 and split_episodes(5, 0.0)[1].sum() == 0
    tr, va = split_episodes(2, 0.5, seed=0)
    ds_tr = SequenceDataset(tiny, ["state/x"], 2, 3, episode_mask=tr)
    ds_va = SequenceDataset(tiny, ["state/x"], 2, 3, episode_mask=va)
    ep_tr = set(ds_tr[list(range(len(ds_tr)))]["episode"].tolist())
    ep_va = set(ds_va[list(range(len(ds_va)))]["episode"].tolist())
    assert ep_tr.isdisjoint(ep_va) and ep_tr | ep_va == {0, 1}


def test_normaliser_stats(tiny: EpisodeStore) -> None:
    stats = compute_stats(tiny, ["state/x", "action"])
    x = np.arange(5, dtype=np.float64)
    np.testing.assert_allclose(stats["state/x"]["min"], [0, 0])
    np.testing.assert_allclose(stats["state/x"]["max"], [4, 40])
    np.testing.assert_allclose(stats["state/x"]["mean"], [x.mean(), 10 * x.mean()])
    np.testing.assert_allclose(stats["state/x"]["std"], [x.std(), 10 * x.std()], rtol=1e-6)
    assert stats["action"]["mean"].shape == (7,) and stats["action"]["mean"].dtype == np.float32
    only_second = compute_stats(tiny, ["state/x"], np.array([False, True]))
    np.testing.assert_allclose(only_second["state/x"]["mean"], [3.5, 35])
    np.testing.assert_allclose(only_second["state/x"]["std"], [0.5, 5], rtol=1e-6)


def test_episode_obs_follow_each_windows_episode(tiny: EpisodeStore) -> None:
    ids = np.array([[7, 8, 0], [9, 0, 0]], np.int64)  # e.g. tokenised instructions
    ds = SequenceDataset(tiny, ["state/x"], 2, 3, episode_obs={"language": ids})
    batch = ds[[0, 2, 3, 4]]
    assert batch["obs"]["language"].dtype == torch.int64
    assert batch["obs"]["language"].tolist() == [ids[0].tolist()] * 2 + [ids[1].tolist()] * 2
    assert batch["episode"].tolist() == [0, 0, 1, 1]
    assert ds[3]["obs"]["language"].tolist() == ids[1].tolist()
    with pytest.raises(ValueError, match="one row per episode"):
        SequenceDataset(tiny, ["state/x"], 2, 3, episode_obs={"language": ids[:1]})
    with pytest.raises(ValueError, match="repeat an obs key"):
        SequenceDataset(tiny, ["state/x"], 2, 3, episode_obs={"state/x": ids})
