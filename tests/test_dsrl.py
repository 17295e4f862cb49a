"""The latent-noise SAC agent: shapes and bounds, an untrained agent plans like the base, SAC
updates move the latent policy towards higher Q, checkpoints round-trip."""

import numpy as np
import pytest
import torch
from toy import STATE_STATS, SteerablePointBase

from robotrl.algos.dsrl import DSRLAgent, DSRLConfig, SteeredPolicy, load_dsrl, save_dsrl
from robotrl.algos.residual import StateFeaturizer


def _agent(**kw) -> DSRLAgent:
    return DSRLAgent(4, (4, 2), DSRLConfig(hidden=32, **kw), seed=0)


def test_noise_is_bounded_and_shaped():
    agent = _agent(bound=0.7, init_log_std=1.0)
    w = agent.act(np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32), explore=True)
    assert w.shape == (64, 8) and w.dtype == np.float32
    assert agent.to_noise(w).shape == (64, 4, 2)
    assert np.abs(w).max() <= 0.7 + 1e-6
    assert np.abs(w).max() > 0.5  # a wide actor reaches close to the bound


def test_untrained_mean_noise_is_zero_so_the_base_plans_from_its_prior_mean():
    agent = _agent()
    feats = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(agent.act(feats, explore=False), 0.0)


def test_log_density_matches_the_sampled_spread():
    # per-dimension log-density of a tanh-Gaussian: the Monte-Carlo entropy of an actor with
    # std 0.1 around 0 is close to the Gaussian's 0.5 * log(2 pi e 0.01) + log(bound)
    agent = _agent(bound=1.0, init_log_std=float(np.log(0.1)))
    _, logp = agent.sample(torch.zeros(4096, 4))
    expected = 0.5 * np.log(2 * np.pi * np.e * 0.01)
    assert abs(-logp.mean().item() - expected) < 0.05


@pytest.mark.slow
def test_updates_move_the_latent_policy_towards_the_rewarded_noise():
    # one-step problem: reward = -|w - target|^2, terminal; the mean noise must approach target
    agent = _agent(bound=1.5, batch_size=128, init_alpha=1e-3)
    rng = np.random.default_rng(0)
    target = np.tile([0.8, -0.8], 4)
    feats = rng.normal(size=(512, 4)).astype(np.float32)
    w = rng.uniform(-1.5, 1.5, size=(512, 8)).astype(np.float32)
    r = -((w - target) ** 2).mean(-1).astype(np.float32)
    for _ in range(600):
        i = rng.integers(0, 512, 128)
        batch = {
            "obs": {"features": feats[i]},
            "action": w[i],
            "reward": r[i],
            "discount": np.zeros(128, np.float32),
            "next_obs": {"features": feats[i]},
        }
        logs = agent.update(batch)
    assert np.isfinite(logs["critic_loss"])
    mean_w = agent.act(feats[:64], explore=False).reshape(64, -1).mean(0)
    assert (np.sign(mean_w) == np.sign(target)).all(), mean_w
    assert np.abs(mean_w).min() > 0.3, mean_w  # moved well away from the prior's mean


def test_steered_policy_plans_from_the_agents_noise():
    base = SteerablePointBase(bias=(0.0, 0.0), noise_gain=0.5)
    feat = StateFeaturizer(["state/pos", "state/goal"], STATE_STATS)
    agent = DSRLAgent(feat.dim, (4, 2), DSRLConfig(hidden=16, bound=1.5), seed=0)
    with torch.no_grad():
        agent.actor[-1].bias[:8] = 10.0  # mean noise at +bound everywhere
    policy = SteeredPolicy(agent, base, feat, explore=False)
    obs = {"state/pos": torch.zeros(2, 1, 2), "state/goal": torch.zeros(2, 1, 2)}
    chunk = policy.predict_chunk(obs)
    assert chunk.shape == (2, 4, 2)
    np.testing.assert_allclose(chunk.numpy(), 0.5 * 1.5, atol=1e-4)  # gain * bound
    np.testing.assert_allclose(policy.last_latent, 1.5, atol=1e-4)
    assert DSRLConfig().bound == 1.0  # the default keeps w within the base's training noise
    assert policy.last_features.shape == (2, 4)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="bound"):
        _agent(bound=0.0)
    with pytest.raises(ValueError, match="target_heads"):
        _agent(ensemble=1)


def test_checkpoint_round_trip(tmp_path):
    agent = _agent(bound=1.2)
    with torch.no_grad():
        agent.actor[-1].bias.normal_()
    save_dsrl(agent, tmp_path / "ck", {"task": "toy"})
    loaded, meta = load_dsrl(tmp_path / "ck")
    feats = np.ones((2, 4), np.float32)
    assert meta == {"task": "toy"} and loaded.cfg.bound == 1.2
    np.testing.assert_allclose(loaded.act(feats, explore=False), agent.act(feats, explore=False))


def _base(kind: str):
    from policies.diffusion import DiffusionPolicy
    from policies.flow_matching import FlowMatchingPolicy
    from policies.tokenizer import WordTokenizer
    from policies.vla import TinyVLA

    torch.manual_seed(0)
    small = {"action_dim": 2, "action_horizon": 4, "hidden": 32}
    if kind == "flow":
        return FlowMatchingPolicy({"state/x": 3}, depth=1, num_steps=3, **small).eval()
    if kind == "diffusion":
        return DiffusionPolicy({"state/x": 3}, **small).eval()
    vocab = WordTokenizer.from_texts(["go left", "go right"]).vocab
    return TinyVLA(
        {"state/x": 3}, image_keys=[], obs_horizon=2, num_steps=3, vocab=vocab, max_tokens=4,
        dim=32, trunk_layers=1, expert_layers=1, heads=2, readout_tokens=2, depth=1, **small,
    ).eval()  # fmt: skip


@pytest.mark.parametrize("kind", ["flow", "diffusion", "vla"])
def test_the_agent_steers_flow_diffusion_and_vla_bases(kind):
    # the base is a black box: the chunk is a deterministic function of the agent's noise
    base = _base(kind)
    stats = {"state/x": {"mean": np.zeros(3), "std": np.ones(3)}}
    feat = StateFeaturizer(["state/x"], stats)
    agent = DSRLAgent(feat.dim, (4, 2), DSRLConfig(hidden=16), seed=0)
    policy = SteeredPolicy(agent, base, feat, explore=False)
    obs = {"state/x": torch.randn(3, base.obs_horizon, 3)}
    if kind == "vla":
        obs["language"] = base.tokenize(["go left", "go right", "go left"])
    first = policy.predict_chunk(obs)
    assert first.shape == (3, 4, 2) and torch.equal(first, policy.predict_chunk(obs))
    with torch.no_grad():
        agent.actor[-1].bias[:8] = 1.0  # another mean noise: another chunk
    assert not torch.allclose(first, policy.predict_chunk(obs))
    assert not policy.base.training and not any(
        p.requires_grad for p in agent.critic_target.parameters()
    )
