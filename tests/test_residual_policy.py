"""A train-rl residual checkpoint evaluated on its base: ``robotrl eval`` rolls it out, a fresh
residual repeats the base exactly, a trained one changes the actions, bad input is refused."""

import shutil

import numpy as np
import pytest
import torch
from tiny_reach import reach_demos, tiny_checkpoint

import sim
from policies.checkpoint import CheckpointError
from policies.registry import set_noise_scale
from robotrl.algos.residual import ResidualAgent, ResidualConfig, save_agent
from robotrl.algos.residual_policy import is_residual_checkpoint, load_residual_policy
from robotrl.chunk_runner import SingleEnvPolicy
from robotrl.cli import compose
from robotrl.commands.eval import run_eval

KEYS = ["state/ee_pos", "state/goal_pos"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("residual_policy")
    return tiny_checkpoint(root, reach_demos(root))


def _residual(directory, base_ckpt, offset=None, **extra_meta):
    """A residual checkpoint on ``base_ckpt``: zero-initialised, or a constant ``offset``."""
    agent = ResidualAgent(6, 7, ResidualConfig(hidden=16, ensemble=2, scale=0.5), seed=0)
    if offset is not None:  # a_r = 0.5 tanh(b) with the last layer's weights at 0
        with torch.no_grad():
            agent.actor[-1].bias.copy_(torch.atanh(torch.as_tensor(offset) / 0.5))
    stats = {k: {"mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0]} for k in KEYS}
    meta = {
        "base_checkpoint": str(base_ckpt),
        "task": "reach",
        "obs_keys": KEYS,
        "execute_horizon": 4,
        "featurizer": stats,
        **extra_meta,
    }
    return save_agent(agent, directory, meta)


def _eval(checkpoint, tmp_path, *extra):
    args = [f"checkpoint={checkpoint}", "episodes=3", "videos=0", "progress=false"]
    return run_eval(compose("eval", [*args, "noise_scale=0", f"output_dir={tmp_path}", *extra]))


def test_the_base_samples_as_it_did_in_training(tmp_path, base):
    policy, _ = load_residual_policy(_residual(tmp_path / "det", base, base_noise_scale=0.0))
    assert policy.base.noise_scale == 0.0  # the default of train-rl: the base's mean noise
    policy, _ = load_residual_policy(_residual(tmp_path / "sampled", base, base_noise_scale=1.0))
    assert policy.base.noise_scale == 1.0
    policy, _ = load_residual_policy(_residual(tmp_path / "older", base))
    assert policy.base.noise_scale == 1.0  # written before the scale was recorded: it sampled


@pytest.mark.slow
def test_a_fresh_residual_evaluates_exactly_as_its_base(tmp_path, base):
    ckpt = _residual(tmp_path / "res", base)
    assert is_residual_checkpoint(ckpt) and not is_residual_checkpoint(base)
    assert not is_residual_checkpoint(tmp_path / "nowhere")
    with_residual = _eval(ckpt, tmp_path)
    alone = _eval(base, tmp_path, "execute_horizon=4")
    for key in ("success_rate", "mean_length", "mean_return"):
        assert with_residual[key] == alone[key]
    on_two = _eval(ckpt, tmp_path, "num_envs=2")
    alone_on_two = _eval(base, tmp_path, "execute_horizon=4", "num_envs=2")
    for key in ("success_rate", "mean_length", "mean_return"):
        assert on_two[key] == alone_on_two[key]


@pytest.mark.slow
def test_a_constant_residual_shifts_every_action(tmp_path, base):
    offset = np.array([0.3, -0.2, 0.1, 0.0, 0.0, 0.0, 0.0], np.float32)  # (7,) arm action
    policy, meta = load_residual_policy(_residual(tmp_path / "res", base, offset))
    assert meta["task"] == "reach" and meta["execute_horizon"] == 4
    set_noise_scale(policy.base, 0.0)
    env = sim.make("reach")
    obs, _ = env.reset(seed=0)
    alone = SingleEnvPolicy(policy.base, 4)
    policy.reset()
    for _ in range(6):
        a, b = policy(obs), alone(obs)
        np.testing.assert_allclose(a, np.clip(b + offset, -1, 1), atol=1e-5)
        np.testing.assert_allclose(policy.last_residual, offset, atol=1e-5)
        obs, *_ = env.step(a)
    env.close()
    out = _eval(tmp_path / "res", tmp_path, "videos=1")
    assert len(out["videos"]) == 1 and out["videos"][0].endswith(".mp4")


def test_the_vector_runner_acts_for_each_env_as_the_one_env_policy(tmp_path, base):
    offset = np.array([0.3, -0.2, 0.1, 0.0, 0.0, 0.0, 0.0], np.float32)
    policy, _ = load_residual_policy(_residual(tmp_path / "res", base, offset))
    set_noise_scale(policy.base, 0.0)
    runner = policy.vector_runner(2)
    envs = [sim.make("reach"), sim.make("reach")]
    singles = [load_residual_policy(tmp_path / "res")[0] for _ in envs]
    for single in singles:
        set_noise_scale(single.base, 0.0)
    obs = [env.reset(seed=i)[0] for i, env in enumerate(envs)]
    for step in range(10):  # past one chunk (Te = 4) and across a reset of env 1 only
        if step == 6:
            obs[1] = envs[1].reset(seed=7)[0]
            runner.reset([1])
            singles[1].reset()
        batch = {k: np.stack([o[k] for o in obs]) for k in obs[0]}
        actions = runner.act(batch)
        assert actions.shape == (2, 7)
        for i, env in enumerate(envs):
            np.testing.assert_allclose(actions[i], singles[i](obs[i]), atol=1e-6)
            np.testing.assert_allclose(runner.last_residuals[i], offset, atol=1e-5)
            obs[i] = env.step(actions[i])[0]
    for env in envs:
        env.close()


def test_a_moved_base_is_named_and_can_be_given(tmp_path, base):
    moved = tmp_path / "moved_base"
    shutil.copytree(base, moved)
    ckpt = _residual(tmp_path / "res", tmp_path / "gone")
    with pytest.raises(CheckpointError, match=r"needs its base .*base_checkpoint="):
        load_residual_policy(ckpt)
    out = _eval(ckpt, tmp_path, f"base_checkpoint={moved}")
    assert out["episodes"] == 3


def test_bad_options_for_a_residual_are_refused(tmp_path, base):
    ckpt = _residual(tmp_path / "res", base)
    with pytest.raises(ValueError, match="trained with execute_horizon=4"):
        _eval(ckpt, tmp_path, "execute_horizon=8")
    (tmp_path / "res" / "config.yaml").write_text("agent: residual\nconfig: [broken\n")
    assert not is_residual_checkpoint(ckpt)  # not YAML: load_policy then says why


def test_zero_policy_proposes_zero_chunks_with_the_lenders_shapes():
    import torch
    from toy import BiasedPointBase

    from robotrl.algos.residual_policy import ZeroPolicy

    like = BiasedPointBase()
    zero = ZeroPolicy(like)
    assert zero.config is like.config and zero.action_dim == 2
    obs = {"state/pos": torch.ones(3, 1, 2), "state/goal": torch.ones(3, 1, 2)}
    chunk = zero.predict_chunk(obs)
    assert chunk.shape == (3, like.action_horizon, 2) and not chunk.any()
    assert zero.parameters() == [] and zero.eval() is zero
