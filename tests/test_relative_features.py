"""Relative features: the state plus each object's position relative to the TCP (per 5 cm), the
same from raw observations and from a policy's window; train-rl reads them by default and the
checkpoint rebuilds them."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_reach import reach_demos, tiny_checkpoint

from robotrl.algos.perception_features import featurizer_for
from robotrl.algos.relative_features import RelativeFeaturizer, object_position_keys
from robotrl.algos.residual import StateFeaturizer, load_agent
from robotrl.algos.residual_policy import load_residual_policy
from robotrl.cli import compose
from robotrl.commands.train_rl import run_train_rl

KEYS = ["state/joint_pos", "state/ee_pos", "state/cube_pos", "state/hole_pos"]
DIMS = {"state/joint_pos": 7, "state/ee_pos": 3, "state/cube_pos": 3, "state/hole_pos": 3}
STATS = {k: {"mean": np.full(n, 0.5), "std": np.full(n, 2.0)} for k, n in DIMS.items()}


def _obs(seed: int, lead: tuple[int, ...] = (2,)) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.normal(size=(*lead, n)).astype(np.float32) for k, n in DIMS.items()}


def test_objects_are_the_positions_that_are_not_the_robots():
    assert object_position_keys(KEYS) == ["state/cube_pos", "state/hole_pos"]
    assert object_position_keys(["state/ee_pos", "state/cube_quat", "images/front"]) == []


def test_each_object_is_appended_relative_to_the_tcp_in_units_of_5_cm():
    feat = RelativeFeaturizer(StateFeaturizer(KEYS, STATS))
    assert feat.dim == 16 + 3 + 3
    obs = _obs(0)
    x = feat(obs)
    assert x.shape == (2, 22) and x.dtype == np.float32
    np.testing.assert_allclose(x[:, :16], feat.state(obs))
    cube = (obs["state/cube_pos"] - obs["state/ee_pos"]) / 0.05
    hole = (obs["state/hole_pos"] - obs["state/ee_pos"]) / 0.05
    np.testing.assert_allclose(x[:, 16:], np.concatenate([cube, hole], axis=-1), rtol=1e-5)
    one = feat({k: v[0] for k, v in obs.items()})  # one observation, no batch dim
    np.testing.assert_allclose(one, x[0], rtol=1e-6)


def test_window_and_raw_features_agree():
    feat = RelativeFeaturizer(StateFeaturizer(KEYS, STATS))
    window = _obs(1, (2, 3))  # (B, To, D): the latest step counts
    latest = {k: v[:, -1] for k, v in window.items()}
    np.testing.assert_allclose(feat.from_window(window), feat(latest))


@pytest.mark.parametrize("keys", [["state/ee_pos", "state/joint_pos"], ["state/cube_pos"]])
def test_state_keys_without_a_tcp_or_an_object_are_refused(keys):
    with pytest.raises(ValueError, match="features=relative needs state/ee_pos"):
        RelativeFeaturizer(StateFeaturizer(keys, STATS))


def test_positions_of_another_size_are_left_out():
    stats = {**STATS, "state/tip_pos": {"mean": np.zeros(2), "std": np.ones(2)}}
    feat = RelativeFeaturizer(StateFeaturizer([*KEYS, "state/tip_pos"], stats))
    assert feat.objects == ["state/cube_pos", "state/hole_pos"]


def test_the_features_setting_chooses_relative():
    state = StateFeaturizer(KEYS, STATS)
    assert isinstance(featurizer_for("relative", state, None), RelativeFeaturizer)


def test_relative_on_a_state_without_objects_reads_the_state_alone_and_says_so(caplog):
    state = StateFeaturizer(["state/joint_pos", "state/ee_pos"], STATS)  # a real arm's state
    with caplog.at_level("WARNING"):
        assert featurizer_for("relative", state, None) is state
    assert "the agent reads the state alone" in caplog.text


def test_train_rl_reads_relative_features_by_default_and_its_checkpoint_rebuilds_them(tmp_path):
    store = reach_demos(tmp_path, episodes=2)
    ckpt = tiny_checkpoint(tmp_path, store, "steps=5")
    tiny = ["total_steps=60", "warmup_steps=30", "critic_warmup_updates=5", "eval_every=60"]
    tiny += ["eval_episodes=1", "residual.hidden=16", "residual.ensemble=2", "videos=0"]
    args = [f"checkpoint={ckpt}", f"demos={store}", "progress=false"]  # features: the default
    out = run_train_rl(compose("train_rl", [*args, *tiny, f"output_dir={tmp_path}"]))
    agent, meta = load_agent(out["checkpoint"])
    assert meta["features"] == "relative"
    policy, _ = load_residual_policy(out["checkpoint"])
    assert isinstance(policy.featurizer, RelativeFeaturizer)
    assert policy.featurizer.objects == ["state/goal_pos"]
    assert agent.obs_dim == policy.featurizer.dim == policy.featurizer.state.dim + 3
