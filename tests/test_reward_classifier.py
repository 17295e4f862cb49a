"""RewardClassifier: shapes, input validation, freezing and the safetensors round trip."""

import numpy as np
import pytest
import torch
from reward_synthetic import SIZE, image

from policies.checkpoint import CheckpointError
from robotrl.algos.reward_classifier import (
    RewardClassifier,
    load_reward_classifier,
    save_reward_classifier,
)


def _model(**kw):
    torch.manual_seed(0)
    return RewardClassifier(
        ["images/front"], image_size=(SIZE, SIZE), state_dims={"state/x": 2}, hidden=32, **kw
    )


def _batch(n=5, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "images/front": np.stack([image(rng, i % 2 == 0) for i in range(n)]),
        "state/x": rng.normal(size=(n, 2)).astype(np.float32),
        "language": "ignored extra key",
    }


def test_predict_proba_shape_range_and_mode_restored():
    model = _model()
    model.train()
    p = model.predict_proba(_batch(5))
    assert p.shape == (5,) and np.all((p > 0) & (p < 1))
    assert model.training  # predict_proba evaluates in eval mode and restores the mode
    np.testing.assert_allclose(model.predict_proba(_batch(5)), p)  # no augmentation at eval


def test_reward_thresholds_one_observation():
    model = _model()
    obs = {k: v[0] for k, v in _batch(1).items()}
    p = float(model.predict_proba({k: v[None] for k, v in obs.items() if k != "language"})[0])
    model.threshold = p - 1e-6
    assert model.reward(obs) == 1.0
    model.threshold = p + 1e-6
    assert model.reward(obs) == 0.0


def test_state_stats_are_used():
    model = _model()
    b = _batch(4)
    before = model.predict_proba(b)
    model.set_state_stats(np.array([5.0, -5.0]), np.array([0.1, 10.0]))
    assert not np.allclose(model.predict_proba(b), before)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        model.set_state_stats(np.zeros(3), np.ones(3))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda b: b.pop("images/front"), "needs observation keys"),
        (lambda b: b.update({"images/front": b["images/front"][:, :8]}), "trained on"),
        (lambda b: b.update({"images/front": b["images/front"].astype(np.float32)}), "uint8"),
        (lambda b: b.update({"state/x": b["state/x"][:, :1]}), r"state/x: expected \(5, 2\)"),
        (lambda b: b.update({"state/x": b["state/x"][:3]}), r"state/x: expected \(5, 2\)"),
    ],
)
def test_bad_observations_raise_clear_errors(change, match):
    b = _batch(5)
    change(b)
    with pytest.raises(ValueError, match=match):
        _model().predict_proba(b)


def test_bad_constructor_arguments_raise():
    with pytest.raises(ValueError, match="images/<cam>"):
        RewardClassifier([])
    with pytest.raises(ValueError, match="images/<cam>"):
        RewardClassifier(["front"])
    with pytest.raises(ValueError, match="state/<k>"):
        RewardClassifier(["images/front"], state_dims={"x": 2})


def test_checkpoint_round_trip_gives_identical_probabilities(tmp_path):
    model = _model(threshold=0.7)
    model.set_state_stats(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    save_reward_classifier(model, tmp_path / "ckpt", meta={"dataset": "x.zarr"})
    loaded, meta = load_reward_classifier(tmp_path / "ckpt")
    assert meta == {"dataset": "x.zarr"} and loaded.threshold == 0.7
    assert loaded.config == model.config
    assert not loaded.training and not any(p.requires_grad for p in loaded.parameters())
    b = _batch(7, seed=3)
    np.testing.assert_array_equal(loaded.predict_proba(b), model.predict_proba(b))


def test_bad_checkpoints_raise_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="no reward classifier"):
        load_reward_classifier(tmp_path)
    save_reward_classifier(_model(), tmp_path / "a")
    (tmp_path / "a" / "config.yaml").write_text("model_type: flow\nconfig: {}\n")
    with pytest.raises(CheckpointError, match="does not describe"):
        load_reward_classifier(tmp_path / "a")
    save_reward_classifier(_model(), tmp_path / "b")
    other = RewardClassifier(["images/front"], image_size=(SIZE, SIZE), hidden=16)
    save_reward_classifier(other, tmp_path / "c")
    (tmp_path / "c" / "model.safetensors").replace(tmp_path / "b" / "model.safetensors")
    with pytest.raises(CheckpointError, match="do not match the config"):
        load_reward_classifier(tmp_path / "b")
