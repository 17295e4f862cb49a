"""Reward-classifier training learns a separable image problem; threshold and metrics maths."""

import numpy as np
import pytest
import torch
from reward_synthetic import SIZE, image

from robotrl.algos.reward_classifier import RewardClassifier
from robotrl.algos.reward_labels import Frames
from robotrl.algos.reward_training import (
    RewardTrainConfig,
    average_precision,
    episode_metrics,
    frame_metrics,
    score,
    select_threshold,
    train_reward_classifier,
)


@pytest.fixture(autouse=True)
def one_thread():
    # two intra-op threads on a shared, loaded 2-core machine ran 15x slower than one
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _frames(episodes: int, seed: int, length: int = 12) -> Frames:
    """Even episodes succeed: their last 3 frames show the red square (positives)."""
    rng = np.random.default_rng(seed)
    imgs, labels, ep, step, success = [], [], [], [], {}
    for e in range(episodes):
        ok = e % 2 == 0
        for t in range(length):
            pos = ok and t >= length - 3
            imgs.append(image(rng, pos))
            labels.append(int(pos))
            ep.append(e)
            step.append(t)
        success[e] = ok
    return Frames(
        obs={"images/front": np.stack(imgs)},
        labels=np.array(labels, np.int8),
        episode=np.array(ep),
        step=np.array(step),
        success=success,
    )


def test_learns_red_square_vs_blue_square_quickly():
    torch.manual_seed(0)
    train, val, test = _frames(16, 0), _frames(6, 1), _frames(8, 2)
    model = RewardClassifier(["images/front"], image_size=(SIZE, SIZE), hidden=32, shift=1)
    before = average_precision(score(model, val), val.labels)
    rows = []
    out = train_reward_classifier(
        model,
        train,
        val,
        RewardTrainConfig(steps=50, batch_size=32, lr=3e-3, eval_every=25, patience=0),
        log=lambda **r: rows.append(r),
    )
    assert out["best_val_ap"] > 0.95 > before
    assert not model.training  # frozen after training
    assert any("val_ap" in r for r in rows) and rows[-1]["step"] == 50
    p = score(model, test)
    thr, info = select_threshold(score(model, val), val.labels, 0.95)
    m = frame_metrics(p, test.labels, thr)
    assert info["met_target"] and m["accuracy"] > 0.95 and m["precision"] > 0.9
    assert m["recall"] > 0.9
    assert episode_metrics(p, test, thr)["fired_in_failures"] == "0/4"


def test_training_stops_early_at_a_perfect_or_stuck_validation_ap():
    torch.manual_seed(0)
    train, val = _frames(16, 0), _frames(6, 1)
    model = RewardClassifier(["images/front"], image_size=(SIZE, SIZE), hidden=32, shift=1)
    cfg = RewardTrainConfig(steps=400, batch_size=32, lr=3e-3, eval_every=25)
    out = train_reward_classifier(model, train, val, cfg)
    assert out["best_val_ap"] == 1.0 and out["steps_run"] == out["best_step"] < 400
    # a validation AP that cannot be computed (no positives) never improves: 2 more validations
    blind = _frames(6, 1)
    blind.labels[:] = 0
    out = train_reward_classifier(model, train, blind, cfg)
    assert out["steps_run"] == 2 * 25 and out["best_val_ap"] is None
    with pytest.raises(ValueError, match="patience"):
        train_reward_classifier(model, train, val, RewardTrainConfig(patience=-1))


def test_head_only_training_leaves_the_encoder_untouched():
    torch.manual_seed(0)
    model = RewardClassifier(["images/front"], image_size=(SIZE, SIZE), hidden=16)
    enc = {k: v.clone() for k, v in model.encoders.state_dict().items()}
    head = {k: v.clone() for k, v in model.head.state_dict().items()}
    cfg = RewardTrainConfig(steps=5, batch_size=8, train_encoder=False)
    train_reward_classifier(model, _frames(4, 0), None, cfg)
    assert all(torch.equal(v, model.encoders.state_dict()[k]) for k, v in enc.items())
    assert not all(torch.equal(v, model.head.state_dict()[k]) for k, v in head.items())


def test_threshold_is_lowest_reaching_target_precision():
    # sorted by score: 0.95 P, 0.9 P, 0.85 N, 0.8 P, 0.7 P, 0.65 N, 0.6 N, 0.55 P, 0.3 P
    probs = np.array([0.95, 0.9, 0.85, 0.8, 0.7, 0.65, 0.6, 0.55, 0.3, 0.1])
    labels = np.array([1, 1, 0, 1, 1, 0, 0, 1, 1, 0], np.int8)
    thr, info = select_threshold(probs, labels, target_precision=0.75)
    # precision at 0.7 is 4/5 (ok), at 0.65 4/6, at 0.55 5/8 -> lowest accepted score is 0.7;
    # the threshold sits between it and the next lower score
    assert thr == pytest.approx(0.675) and info["met_target"]
    assert info["val"]["precision"] == pytest.approx(0.8) and info["val"]["recall"] == 4 / 6
    thr, info = select_threshold(probs, labels, target_precision=1.0)
    assert thr == pytest.approx(0.875) and info["val"]["fp"] == 0
    # ignored frames do not count
    thr, _ = select_threshold(probs, np.where(probs == 0.85, -1, labels).astype(np.int8), 1.0)
    assert thr == pytest.approx(0.675)


def test_threshold_never_below_minimum_and_reports_a_missed_target():
    probs = np.array([0.9, 0.8, 0.45, 0.4])
    labels = np.array([0, 1, 1, 1], np.int8)
    thr, info = select_threshold(probs, labels, target_precision=0.95, min_threshold=0.5)
    assert not info["met_target"] and thr >= 0.5
    thr, info = select_threshold(np.array([0.2, 0.1]), np.array([1, 0], np.int8), 0.9)
    assert thr == 1.0 and not info["met_target"] and info["val"]["tp"] == 0
    with pytest.raises(ValueError, match="positive validation frames"):
        select_threshold(probs, np.zeros(4, np.int8))


def test_frame_and_episode_metrics_count_correctly():
    frames = Frames(
        obs={},
        labels=np.array([0, 0, 1, 0, 0, 0, 0, 1], np.int8),
        episode=np.array([0, 0, 0, 1, 1, 2, 2, 2]),
        step=np.array([0, 1, 2, 0, 1, 0, 1, 2]),
        success={0: True, 1: False, 2: True},
    )
    probs = np.array([0.1, 0.9, 0.95, 0.2, 0.7, 0.1, 0.1, 0.2])
    m = frame_metrics(probs, frames.labels, 0.5)
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (1, 2, 1, 4)
    assert m["precision"] == pytest.approx(1 / 3) and m["recall"] == 0.5
    e = episode_metrics(probs, frames, 0.5)
    assert e["fired_in_successes"] == "1/2" and e["fired_in_failures"] == "1/1"
    assert e["precision"] == 0.5 and e["early"] == 1 and e["lead_frames"] == 1.0
    assert average_precision(np.array([0.9, 0.8, 0.1]), np.array([1, 0, 1], np.int8)) == (
        pytest.approx((1 + 2 / 3) / 2)
    )
