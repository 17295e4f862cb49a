"""Perception features: proprioception + a VLA's estimate of the task state from its cameras and
instruction, the same from raw observations and from a chunk runner's window; DSRL steers a VLA
with them and its checkpoint rebuilds them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_vla import tiny_vla

from robotrl.algos.dsrl import DSRLAgent, DSRLConfig, SteeredPolicy
from robotrl.algos.perception_features import PerceptionFeaturizer, featurizer_for
from robotrl.algos.residual import StateFeaturizer

TEXTS = ["lift the red cube", "lift the blue cube"]
STATS = {"state/x": {"mean": np.zeros(3), "std": np.ones(3)}}


def _vla(**kw):
    return tiny_vla(
        {"state/x": 3},
        TEXTS,
        obs_horizon=1,
        image_keys=["images/front"],
        image_channels=(8, 8, 8, 8),
        aux_dims={"state/obj": 3},
        **kw,
    ).eval()


def _raw(seed: int, n: int = 2) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "state/x": rng.normal(size=(n, 3)).astype(np.float32),
        "images/front": rng.integers(0, 256, (n, 16, 16, 3), dtype=np.uint8),
        "language": np.array(TEXTS[:n]),
    }


def test_raw_and_window_features_agree_and_carry_the_perceived_state():
    vla = _vla()
    feat = PerceptionFeaturizer(StateFeaturizer(["state/x"], STATS), vla)
    assert feat.dim == 3 + 3
    obs = _raw(0)
    x = feat(obs)
    assert x.shape == (2, 6) and x.dtype == np.float32
    np.testing.assert_allclose(x[:, :3], obs["state/x"])  # standardised with mean 0, std 1
    window = {k: torch.from_numpy(obs[k])[:, None] for k in ("state/x", "images/front")}
    window["language"] = vla.tokenize(list(obs["language"]))
    np.testing.assert_allclose(feat.from_window(window), x, atol=1e-6)
    with torch.no_grad():
        np.testing.assert_allclose(x[:, 3:], vla.perceive(window).numpy(), atol=1e-6)
    other = dict(obs, language=np.array(TEXTS[::-1]))  # the instruction changes the estimate
    assert not np.allclose(feat(other)[:, 3:], x[:, 3:])


def test_a_policy_that_does_not_perceive_is_refused():
    plain = tiny_vla({"state/x": 3}, TEXTS, obs_horizon=1, image_keys=["images/front"])
    with pytest.raises(ValueError, match="trained with aux_keys"):
        PerceptionFeaturizer(StateFeaturizer(["state/x"], STATS), plain)


def test_dsrl_steers_a_vla_from_its_perception():
    vla = _vla()
    feat = PerceptionFeaturizer(StateFeaturizer(["state/x"], STATS), vla)
    agent = DSRLAgent(feat.dim, (vla.action_horizon, vla.action_dim), DSRLConfig(), seed=0)
    steered = SteeredPolicy(agent, vla, feat, explore=False)
    obs = _raw(1)
    window = {k: torch.from_numpy(obs[k])[:, None] for k in ("state/x", "images/front")}
    window["language"] = vla.tokenize(list(obs["language"]))
    chunk = steered.predict_chunk(window)
    assert chunk.shape == (2, vla.action_horizon, vla.action_dim)
    np.testing.assert_allclose(steered.last_features, feat(obs), atol=1e-6)


def test_a_dsrl_checkpoint_on_perception_rebuilds_its_featurizer(tmp_path):
    from policies.checkpoint import save_policy
    from robotrl.algos.dsrl import load_steered_policy, save_dsrl

    vla = _vla()
    base = save_policy(vla, tmp_path / "vla", {"task": "tabletop", "execute_horizon": 2})
    feat = PerceptionFeaturizer(StateFeaturizer(["state/x"], STATS), vla)
    agent = DSRLAgent(feat.dim, (vla.action_horizon, vla.action_dim), DSRLConfig(), seed=0)
    meta = {
        "base_checkpoint": str(base),
        "task": "tabletop",
        "obs_keys": ["state/x"],
        "features": "perception",
        "execute_horizon": 2,
        "featurizer": {k: {s: v.tolist() for s, v in st.items()} for k, st in STATS.items()},
    }
    steered, _ = load_steered_policy(save_dsrl(agent, tmp_path / "agent", meta))
    assert isinstance(steered.featurizer, PerceptionFeaturizer)
    obs = _raw(2)
    np.testing.assert_allclose(steered.featurizer(obs), feat(obs), atol=1e-6)


def test_the_features_setting_chooses_the_featurizer():
    state = StateFeaturizer(["state/x"], STATS)
    assert featurizer_for("state", state, _vla()) is state
    assert isinstance(featurizer_for("perception", state, _vla()), PerceptionFeaturizer)
    with pytest.raises(ValueError, match="features must be one of"):
        featurizer_for("pixels", state, _vla())
