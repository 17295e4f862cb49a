"""An agent checkpoint's kind is read from its config; its base and features load with one-line
errors for a missing base, incomplete metadata and mismatched feature sizes."""

import numpy as np
import pytest

from policies.checkpoint import CheckpointError
from robotrl.algos.agent_checkpoint import checkpoint_kind, load_context


def test_checkpoint_kind(tmp_path):
    for kind in ("residual", "dsrl"):
        (tmp_path / kind).mkdir()
        (tmp_path / kind / "config.yaml").write_text(f"agent: {kind}\n")
        assert checkpoint_kind(tmp_path / kind) == kind
    (tmp_path / "bc").mkdir()
    (tmp_path / "bc" / "config.yaml").write_text("policy: flow\n")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.yaml").write_text("agent: [unclosed\n")
    assert checkpoint_kind(tmp_path / "bc") is None
    assert checkpoint_kind(tmp_path / "bad") is None
    assert checkpoint_kind(tmp_path / "missing") is None


META = {
    "obs_keys": ["state/x"],
    "featurizer": {"state/x": {"mean": [0.0, 0.0], "std": [1.0, 1.0]}},
    "execute_horizon": 4,
}


def test_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(CheckpointError, match="names no base checkpoint"):
        load_context(tmp_path, META, 2, "residual")
    with pytest.raises(CheckpointError, match=r"the DSRL agent at .* needs its base"):
        load_context(tmp_path, {**META, "base_checkpoint": str(tmp_path / "gone")}, 2, "DSRL agent")


def test_base_features_and_settings_load(tmp_path):
    import torch

    from policies.checkpoint import save_policy
    from policies.flow_matching import FlowMatchingPolicy

    torch.manual_seed(0)
    base = FlowMatchingPolicy({"state/x": 2}, action_dim=2, action_horizon=4, hidden=16, depth=1)
    save_policy(base, tmp_path / "base", {"task": "reach"})
    meta = {**META, "base_checkpoint": str(tmp_path / "base")}
    ctx = load_context(tmp_path, meta, 2, "residual")
    assert not ctx.base.training and ctx.execute_horizon == 4
    assert ctx.meta["task"] == "reach" and ctx.meta["execute_horizon"] == 4
    np.testing.assert_allclose(ctx.featurizer({"state/x": np.ones((1, 2))}), [[1.0, 1.0]])
    with pytest.raises(CheckpointError, match="metadata lacks \\['featurizer'\\]"):
        load_context(tmp_path, {k: v for k, v in meta.items() if k != "featurizer"}, 2, "residual")
    with pytest.raises(CheckpointError, match="2 features from obs_keys, the agent reads 3"):
        load_context(tmp_path, meta, 3, "residual")
