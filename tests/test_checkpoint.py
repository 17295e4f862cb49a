import numpy as np
import pytest
import torch

from policies.checkpoint import CheckpointError, load_policy, read_config, save_policy
from policies.registry import make_policy

STATS = {
    "state/x": {"mean": np.full(3, 2.0), "std": np.full(3, 0.5)},
    "action": {"min": -np.ones(2) * 0.5, "max": np.ones(2)},
}


@pytest.mark.parametrize("name", ["flow", "diffusion"])
def test_round_trip_gives_identical_actions(tmp_path, name):
    torch.manual_seed(0)
    p = make_policy(
        name,
        state_dims={"state/x": 3},
        action_dim=2,
        action_horizon=4,
        hidden=32,
        obs_feature_dim=32,
        stats=STATS,
    ).eval()
    obs = {"state/x": torch.randn(5, 2, 3)}
    noise = torch.randn(5, 4, 2)
    before = p.predict_chunk(obs, noise=noise)
    save_policy(p, tmp_path / "ckpt", meta={"task": "lift"})
    q, meta = load_policy(tmp_path / "ckpt")
    assert meta == {"task": "lift"} and not q.training
    assert torch.equal(q.predict_chunk(obs, noise=noise), before)
    assert torch.equal(
        q.normalizer.normalize("state/x", obs["state/x"]),
        p.normalizer.normalize("state/x", obs["state/x"]),
    )


def test_bad_checkpoints_are_clear_errors(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_policy(tmp_path / "nothing")
    p = make_policy(
        "flow",
        state_dims={"state/x": 3},
        action_dim=2,
        action_horizon=4,
        hidden=32,
        obs_feature_dim=32,
    )
    d = save_policy(p, tmp_path / "c")
    (d / "model.safetensors").write_bytes(b"\x00garbage")
    with pytest.raises(CheckpointError, match="cannot read weights"):
        load_policy(d)
    save_policy(p, d)
    cfg = (d / "config.yaml").read_text().replace("hidden: 32", "hidden: 64")
    (d / "config.yaml").write_text(cfg)
    with pytest.raises(CheckpointError, match="do not match"):
        load_policy(d)
    (d / "config.yaml").write_text("policy_type: transformer\nconfig: {}\n")
    with pytest.raises(CheckpointError, match="does not describe a policy"):
        read_config(d)
    (d / "config.yaml").write_text("policy_type: flow\nconfig: {state_dims: {}, wings: 2}\n")
    with pytest.raises(CheckpointError, match="config does not fit"):
        load_policy(d)
