import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from policies.checkpoint import (
    FORMAT_VERSION,
    CheckpointError,
    execute_horizon,
    load_policy,
    read_config,
    read_doc,
    save_policy,
)
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


GOLDEN = Path(__file__).resolve().parent / "data" / "golden_flow"


# float32 kernels differ between CPUs (the same checkpoint gives 1.5e-6 on another machine's
# BLAS): well below any change to the format or the policy's numerics, which moves actions by
# orders of magnitude more
ATOL = 1e-5


def _golden_chunk(directory):
    policy, meta = load_policy(directory)
    data = np.load(GOLDEN / "expected.npz")
    obs = {k: torch.from_numpy(data[k]) for k in ("state/ee_pos", "state/goal_pos")}
    with torch.no_grad():
        chunk = policy.predict_chunk(obs, torch.from_numpy(data["noise"])).numpy()
    return chunk, data["chunk"], meta


def test_the_golden_checkpoint_still_loads_and_predicts_what_it_did():
    """A committed format-1 checkpoint (tests/data/make_golden.py): a change to the format or
    to the flow policy's numerics that would break users' checkpoints fails here."""
    assert read_config(GOLDEN / "checkpoint")["format_version"] == FORMAT_VERSION == 1
    chunk, expected, meta = _golden_chunk(GOLDEN / "checkpoint")
    np.testing.assert_allclose(chunk, expected, atol=ATOL)
    assert meta == {"task": "reach", "execute_horizon": 2}


def test_a_checkpoint_without_a_version_is_format_0_and_loads(tmp_path):
    old = tmp_path / "old"
    shutil.copytree(GOLDEN / "checkpoint", old)
    text = (old / "config.yaml").read_text()
    (old / "config.yaml").write_text(text.replace("format_version: 1\n", ""))
    assert "format_version" not in read_config(old)
    chunk, expected, _ = _golden_chunk(old)
    np.testing.assert_allclose(chunk, expected, atol=ATOL)


@pytest.mark.parametrize(
    ("version", "match"),
    [("2", "format 2, newer than this robotrl reads \\(1\\): upgrade robotrl"),
     ("-1", "format_version must be an int >= 0"),
     ("one", "format_version must be an int >= 0")],
)  # fmt: skip
def test_an_unreadable_format_is_refused_in_one_line(tmp_path, version, match):
    new = tmp_path / "new"
    shutil.copytree(GOLDEN / "checkpoint", new)
    text = (new / "config.yaml").read_text()
    (new / "config.yaml").write_text(
        text.replace("format_version: 1", f"format_version: {version}")
    )
    with pytest.raises(CheckpointError, match=match):
        load_policy(new)


def test_every_checkpoint_kind_records_the_format(tmp_path):
    from robotrl.algos.residual import ResidualAgent, ResidualConfig, load_agent, save_agent

    agent = ResidualAgent(4, 7, ResidualConfig(hidden=8, ensemble=2))
    save_agent(agent, tmp_path / "res", {"task": "reach"})
    assert read_doc(tmp_path / "res")["format_version"] == FORMAT_VERSION
    assert load_agent(tmp_path / "res")[1] == {"task": "reach"}
    text = (tmp_path / "res" / "config.yaml").read_text()
    (tmp_path / "res" / "config.yaml").write_text(
        text.replace("format_version: 1", "format_version: 9")
    )
    with pytest.raises(CheckpointError, match="upgrade robotrl"):
        load_agent(tmp_path / "res")


def test_execute_horizon_is_the_override_else_the_recorded_else_half_the_chunk():
    assert execute_horizon({"execute_horizon": 4}, 16, override=2) == 2
    assert execute_horizon({"execute_horizon": 4}, 16) == 4
    assert execute_horizon({}, 16) == 8  # a checkpoint from before train-bc recorded it
    assert execute_horizon({"execute_horizon": None}, 10) == 5
