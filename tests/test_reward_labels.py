"""Frame labels, episode splits and class-balanced batches of the reward classifier."""

import numpy as np
import pytest
from reward_synthetic import write_store

from robotrl.algos.reward_labels import (
    IGNORED,
    NEGATIVE,
    POSITIVE,
    balanced_batch,
    label_episode,
    load_frames,
    split_by_episode,
)
from robotrl.datasets import EpisodeStore


def test_reward_of_step_t_labels_the_observation_after_it():
    # 5 steps, success reached by the action of step 2 and held: frames 3, 4, 5 (final) achieved
    y = label_episode(np.array([0, 0, 1, 1, 1.0]), success=True, has_final=True)
    np.testing.assert_array_equal(y, [0, 0, 0, 1, 1, 1])
    y = label_episode(np.array([0, 0, 1, 1, 1.0]), success=True, has_final=False)
    np.testing.assert_array_equal(y, [0, 0, 0, 1, 1])


def test_positive_window_and_ignored_band_precede_the_first_achieved_frame():
    reward = np.array([0, 0, 0, 0, 0, 0, 1.0])  # terminated on success: only the final frame
    y = label_episode(reward, True, True, positive_window=3, ignore_before=2)
    np.testing.assert_array_equal(y, [0, 0, 0, IGNORED, IGNORED, POSITIVE, POSITIVE, POSITIVE])
    assert (y == POSITIVE).sum() == 3 and (y == IGNORED).sum() == 2


def test_operator_labelled_success_without_reward_uses_the_last_frames():
    y = label_episode(np.zeros(6), success=True, has_final=True, positive_window=2)
    np.testing.assert_array_equal(y, [0, 0, 0, 0, 0, 1, 1])


def test_failed_episode_is_all_negative():
    y = label_episode(np.zeros(8), False, True, positive_window=4, ignore_before=3)
    assert (y == NEGATIVE).all() and len(y) == 9


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reward": np.array([0, 0.3, 0.7])}, "sparse 0/1"),
        ({"positive_window": 0}, "positive_window"),
        ({"ignore_before": -1}, "ignore_before"),
    ],
)
def test_bad_label_arguments_raise(kwargs, match):
    args = {"reward": np.zeros(3), "success": True, "has_final": True, **kwargs}
    with pytest.raises(ValueError, match=match):
        label_episode(**args)


def test_load_frames_appends_final_obs_and_tracks_episodes(tmp_path):
    store = EpisodeStore.open(write_store(tmp_path / "s.zarr", episodes=4, length=6))
    f = load_frames(store, [0, 1], ["images/front", "state/x"], positive_window=3)
    assert len(f) == 14 and f.obs["images/front"].shape == (14, 16, 16, 3)
    np.testing.assert_array_equal(f.episode, [0] * 7 + [1] * 7)
    np.testing.assert_array_equal(f.step[:7], np.arange(7))
    # the red square (state/x[:, 1]) is exactly where the labels say positive
    np.testing.assert_array_equal(f.labels == POSITIVE, f.obs["state/x"][:, 1] == 1)
    assert f.success == {0: True, 1: False}
    with pytest.raises(ValueError, match="images/wrist"):
        load_frames(store, [0], ["images/wrist"])


def test_split_is_by_episode_disjoint_and_stratified():
    success = np.array([True] * 30 + [False] * 20)
    train, val, test = split_by_episode(success, 0.2, 0.2, seed=3)
    assert len(set(train) | set(val) | set(test)) == 50
    assert not (set(train) & set(val) or set(train) & set(test) or set(val) & set(test))
    assert (success[val].sum(), (~success[val]).sum()) == (6, 4)
    assert (success[test].sum(), (~success[test]).sum()) == (6, 4)
    again = split_by_episode(success, 0.2, 0.2, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip((train, val, test), again, strict=True))
    with pytest.raises(ValueError, match="successful episodes"):
        split_by_episode(np.array([True, True, False, False]), 0.2, 0.2)
    with pytest.raises(ValueError, match="val_ratio"):
        split_by_episode(success, 0.6, 0.5)


def test_balanced_batch_ratio_and_never_draws_ignored():
    rng = np.random.default_rng(0)
    labels = np.array([POSITIVE] * 10 + [NEGATIVE] * 500 + [IGNORED] * 20, dtype=np.int8)
    idx = np.concatenate([balanced_batch(labels, 70, 2.5, rng) for _ in range(50)])
    n_pos, n_neg = (labels[idx] == POSITIVE).sum(), (labels[idx] == NEGATIVE).sum()
    assert n_neg / n_pos == pytest.approx(2.5, rel=0.01)
    assert not (labels[idx] == IGNORED).any()
    assert len(np.unique(idx[labels[idx] == NEGATIVE])) > 400  # negatives are not a fixed subset
    with pytest.raises(ValueError, match="positive and negative"):
        balanced_batch(np.zeros(5, np.int8), 8, 2.0, rng)
