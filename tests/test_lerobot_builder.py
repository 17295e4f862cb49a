"""lerobot_builder: lerobot policies built from a config for our keys, saved and loaded back
(through LeRobotPolicyAdapter.from_config / from_pretrained); bad configs raise clearly.

``-m lerobot`` tests need the lerobot venv (``.ci/lerobot_env.sh``); no hub access.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_lerobot_adapter import DA, ENV_STATE, STATE_DIMS, TA, TO, B, _adapter, _lerobot, _obs

from policies.lerobot_adapter import LeRobotPolicyAdapter


@pytest.mark.lerobot
@pytest.mark.parametrize("kind", ["diffusion", "act"])
def test_save_and_reload_gives_identical_actions(kind: str, tmp_path: Path) -> None:
    stats = {  # lerobot's normalisation must round-trip too: actions unnormalised into +-0.5
        "action": {
            "min": np.full(DA, -0.5, np.float32),
            "max": np.full(DA, 0.5, np.float32),
            "mean": np.zeros(DA, np.float32),
            "std": np.full(DA, 0.1, np.float32),
        },
        "observation.state": {
            "min": np.full(11, -2.0, np.float32),
            "max": np.full(11, 2.0, np.float32),
            "mean": np.zeros(11, np.float32),
            "std": np.full(11, 2.0, np.float32),
        },
    }
    p = _adapter(kind, images=True, dataset_stats=stats)
    p.save_pretrained(tmp_path / "ckpt")
    q = LeRobotPolicyAdapter.from_pretrained(tmp_path / "ckpt", state_dims=STATE_DIMS)
    assert q.config == p.config
    obs = _obs(TO[kind], images=True)
    noise = torch.randn(B, 8, DA) if kind == "diffusion" else None
    torch.manual_seed(1)
    a = p.predict_chunk(obs, noise=noise)
    torch.manual_seed(1)
    b = q.predict_chunk(obs, noise=noise)
    assert torch.equal(a, b)
    if kind == "diffusion":  # clip_sample keeps normalised actions in [-1, 1] -> [-0.5, 0.5]
        assert a.abs().max() <= 0.5 + 1e-6
        torch.manual_seed(2)
        assert not torch.equal(q.predict_chunk(obs), a)  # other noise, other chunk

    # lerobot's bare policy.save_pretrained has no processors: refuse silently-unnormalised use
    p.policy.save_pretrained(tmp_path / "bare")
    with pytest.raises(FileNotFoundError, match=r"policy_preprocessor\.json"):
        LeRobotPolicyAdapter.from_pretrained(tmp_path / "bare", state_dims=STATE_DIMS)
    r = LeRobotPolicyAdapter.from_pretrained(
        tmp_path / "bare", state_dims=STATE_DIMS, require_processors=False
    )
    assert r.predict_chunk(obs, noise=noise).shape == (B, TA[kind], DA)
    with pytest.raises(FileNotFoundError, match="no lerobot policy"):
        LeRobotPolicyAdapter.from_pretrained(tmp_path / "nothing", state_dims=STATE_DIMS)


@pytest.mark.lerobot
def test_bad_configs_raise_clear_errors() -> None:
    _lerobot()
    with pytest.raises(ValueError, match="images/<cam>"):
        LeRobotPolicyAdapter.from_config(
            "act", state_dims=STATE_DIMS, action_dim=DA, image_keys=["front"], image_size=(8, 8)
        )
    with pytest.raises(ValueError, match="not in state_dims"):
        LeRobotPolicyAdapter.from_config(
            "act", state_dims=STATE_DIMS, action_dim=DA, env_state_keys=["state/nope"]
        )
    with pytest.raises(ValueError, match=r"dataset_stats\['observation.state'\]\['min'\]"):
        LeRobotPolicyAdapter.from_config(
            "act",
            state_dims=STATE_DIMS,
            action_dim=DA,
            env_state_keys=ENV_STATE,
            dataset_stats={"observation.state": {"min": np.zeros(11), "max": np.ones(11)}},
        )
    with pytest.raises(ValueError, match="unsupported lerobot policy type 'pi0'"):
        LeRobotPolicyAdapter.from_config("pi0", state_dims=STATE_DIMS, action_dim=DA)
