"""The residual PPO agent: it starts as its base, explores within its bound, moves its mean
towards what the advantages favour, keeps its weights through a checkpoint, and its GAE
bootstraps truncations but not terminations."""

import numpy as np
import pytest
import torch

from policies.checkpoint import CheckpointError
from robotrl.algos.residual import ResidualAgent, ResidualConfig, save_agent
from robotrl.algos.residual_ppo import (
    ResidualPPOAgent,
    ResidualPPOConfig,
    gae,
    load_residual_ppo,
    save_residual_ppo,
)

CFG = ResidualPPOConfig(hidden=32, minibatch_size=64, epochs=4, lr=1e-2)


def _inputs(n=64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)).astype(np.float32), rng.uniform(-1, 1, (n, 2)).astype(np.float32)


def test_the_untrained_agent_acts_as_its_base_and_explores_within_its_bound():
    agent = ResidualPPOAgent(5, 2, CFG)
    obs, base = _inputs(4000)
    a, res = agent.act(obs, base, explore=False)
    np.testing.assert_array_equal(res, 0.0)
    np.testing.assert_allclose(a, base, atol=1e-7)
    a, res = agent.act(obs, base, explore=True, rng=np.random.default_rng(1))
    assert np.abs(res).max() <= CFG.scale + 1e-7
    assert np.abs(a).max() <= 1.0
    # u ~ N(0, 0.5^2): the residual's std is about 0.5 * scale (clipping at 2 std trims it)
    assert 0.4 * CFG.scale < res.std() < 0.5 * CFG.scale


def test_an_update_moves_the_mean_towards_positive_advantages():
    agent = ResidualPPOAgent(5, 2, CFG)
    gen = torch.Generator().manual_seed(0)
    obs, base = _inputs(512)
    u, log_prob, _ = agent.sample(obs, base, gen)
    batch = {
        "obs": obs, "base": base, "u": u, "log_prob": log_prob,
        "advantage": u[:, 0].copy(),  # a larger first component did better
        "ret": np.zeros(512, np.float32),
    }  # fmt: skip
    before = agent.act(obs, base, explore=False)[1][:, 0].mean()
    logs = agent.update(batch, gen)
    after = agent.act(obs, base, explore=False)[1][:, 0].mean()
    assert after > before + 0.01
    assert logs["approx_kl"] >= 0 and 0 <= logs["clip_frac"] <= 1
    assert np.isfinite(logs["value_loss"]) and logs["residual_std"] > 0


def test_gae_bootstraps_truncations_and_the_rollouts_end_but_not_terminations():
    g, lam = 0.5, 1.0
    rewards = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]], np.float32)
    values = np.full((3, 2), 0.25, np.float32)
    terminated = np.array([[0, 0], [1, 0], [0, 0]], bool)
    truncated = np.array([[0, 0], [0, 1], [0, 0]], bool)
    final = np.zeros((3, 2), np.float32)
    final[1, 1] = 2.0  # V(final observation) of env 1's truncated episode
    adv, ret = gae(rewards, values, terminated, truncated, final, np.array([4.0, 8.0]), g, lam)
    # env 0: terminated at t=1 (return 1, discounted once at t=0); a new episode at t=2 runs on
    np.testing.assert_allclose(ret[:, 0], [0.5, 1.0, 0.5 * 4.0])
    # env 1: truncated at t=1, bootstrapped from V(final) = 2
    np.testing.assert_allclose(ret[:, 1], [0.25 * 2.0, 0.5 * 2.0, 0.5 * 8.0])
    np.testing.assert_allclose(adv, ret - values)
    with pytest.raises(ValueError, match="share a"):
        gae(rewards[:2], values, terminated, truncated, final, np.zeros(2), g, lam)


def test_a_checkpoint_keeps_the_agent_and_refuses_another_kind(tmp_path):
    agent = ResidualPPOAgent(5, 2, CFG)
    with torch.no_grad():
        agent.mean[-1].bias.fill_(0.3)
    save_residual_ppo(agent, tmp_path / "ppo", {"task": "x"})
    loaded, meta = load_residual_ppo(tmp_path / "ppo")
    obs, base = _inputs()
    np.testing.assert_array_equal(
        loaded.act(obs, base, explore=False)[0], agent.act(obs, base, explore=False)[0]
    )
    assert meta == {"task": "x"} and loaded.cfg == CFG
    save_agent(ResidualAgent(5, 2, ResidualConfig(hidden=16, ensemble=2)), tmp_path / "res", {})
    with pytest.raises(CheckpointError, match="not a residual PPO checkpoint"):
        load_residual_ppo(tmp_path / "res")


def _correlated_rollout(agent, steps, n, reset_at):
    """``steps`` sampled steps of ``n`` envs, every episode restarting at step ``reset_at``;
    returns the noise ``u - mu`` (steps, n, A) and each step's batch."""
    gen, rng = torch.Generator().manual_seed(0), np.random.default_rng(0)
    prev = {
        "prev_obs": np.zeros((n, 5), np.float32), "prev_base": np.zeros((n, 2), np.float32),
        "prev_u": np.zeros((n, 2), np.float32), "first": np.ones(n, bool),
    }  # fmt: skip
    noise, batches = [], []
    for t in range(steps):
        obs, base = _inputs(n, seed=int(rng.integers(1 << 30)))
        u, log_prob, _ = agent.sample(obs, base, gen, prev)
        with torch.no_grad():
            noise.append(u - agent.mean(agent.inputs(obs, base)).numpy())
        batches.append({"obs": obs, "base": base, "u": u, "log_prob": log_prob, **prev})
        first = np.full(n, t + 1 == reset_at)
        prev = {"prev_obs": obs, "prev_base": base, "prev_u": u, "first": first}
    return np.array(noise), batches


def test_correlated_exploration_holds_its_noise_within_an_episode_and_scores_it_exactly():
    agent = ResidualPPOAgent(5, 2, ResidualPPOConfig(hidden=32, noise_correlation=0.9))
    with torch.no_grad():  # a mean that depends on the state, so the carried noise is u - mu
        agent.mean[-1].weight.normal_()
    noise, batches = _correlated_rollout(agent, steps=30, n=4000, reset_at=20)
    assert np.allclose(noise.std(axis=(1, 2)), 0.5, atol=0.03)  # stationary, the init std
    lag1 = [np.corrcoef(noise[t].ravel(), noise[t + 1].ravel())[0, 1] for t in range(30 - 1)]
    assert np.allclose(lag1[:19], 0.9, atol=0.03)  # within the first episode
    assert abs(lag1[19]) < 0.05  # a new episode draws its noise afresh
    for b in batches[::7]:  # the update's log-density is the rollout's: ratio 1 before it
        x = agent.inputs(b["obs"], b["base"])
        dist = agent.conditional(x, *agent.previous(b))
        log_prob = dist.log_prob(torch.as_tensor(b["u"])).sum(-1).detach().numpy()
        np.testing.assert_allclose(log_prob, b["log_prob"], atol=1e-5)


@pytest.mark.parametrize(
    "bad",
    [
        {"lr": 0.0}, {"num_envs": 0}, {"gamma": 1.5}, {"lam": -0.1},
        {"noise_correlation": 1.0}, {"noise_correlation": -0.1},
    ],
)  # fmt: skip
def test_a_bad_setting_is_refused(bad):
    with pytest.raises(ValueError, match="residual_ppo"):
        ResidualPPOConfig(**bad)
