"""Flow-matching policy: the SDE keeps the ODE's marginals, log-probs recompute exactly, the
Flow-Noise std stays in bounds, and BC fits a conditional target."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from policies.flow_matching import FlowMatchingPolicy, gaussian_log_prob

M, S = 2.0, 0.3  # 1-D data N(M, S^2)


class ExactVelocity(nn.Module):
    """v(x, t) = E[eps - a | x_t = x] for a ~ N(M, S^2), x_t = t eps + (1 - t) a."""

    hidden = 4

    def forward(self, x, t, cond):
        t = t.double()[:, None, None]
        x = x.double()
        mu_t = (1 - t) * M
        var_t = t**2 + (1 - t) ** 2 * S**2
        e_eps = t * (x - mu_t) / var_t
        e_a = M + (1 - t) * S**2 * (x - mu_t) / var_t
        return (e_eps - e_a).float(), torch.zeros(x.shape[0], self.hidden)


def _policy(**kw):
    torch.manual_seed(0)
    kw.setdefault("state_dims", {"state/x": 3})
    return FlowMatchingPolicy(
        action_dim=kw.pop("action_dim", 2),
        obs_horizon=2,
        action_horizon=kw.pop("action_horizon", 4),
        hidden=32,
        obs_feature_dim=32,
        **kw,
    )


def _obs(b, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"state/x": torch.randn(b, 2, d, generator=g)}


def _exact(num_steps):
    p = _policy(action_dim=1, action_horizon=1, num_steps=num_steps)
    p.net = ExactVelocity()
    p.noise_head = nn.Linear(4, 1)
    return p


def test_sde_preserves_the_marginal_at_k100():
    p = _exact(100)
    n = 40_000
    with torch.no_grad():
        out = p.sample_chain(_obs(n), mode="sde", generator=torch.Generator().manual_seed(1))
    x = out["chain"][:, -1, 0, 0].double()
    assert abs(x.mean().item() - M) < 0.01
    assert abs(x.std().item() - S) < 0.01
    assert out["stochastic"].all()


def test_ode_at_k4_is_visibly_off_but_at_k100_close():
    for k, tol_ok in ((4, False), (100, True)):
        p = _exact(k)
        with torch.no_grad():
            x = p.sample_chain(_obs(20_000), mode="ode")["chain"][:, -1, 0, 0].double()
        close = abs(x.std().item() - S) < 0.01 and abs(x.mean().item() - M) < 0.01
        assert close == tol_ok, (k, x.mean().item(), x.std().item())


@pytest.mark.parametrize("mode", ["sde", "noise_net"])
def test_log_prob_recomputes_exactly(mode):
    p = _policy(num_steps=4)
    obs = _obs(64)
    k_star = torch.randint(0, 4, (64,)) if mode == "sde" else None
    with torch.no_grad():
        out = p.sample_chain(obs, mode=mode, k_star=k_star)
        lp = p.log_prob(obs, out["chain"], mode=mode, k_star=k_star)
        # Recomputed in minibatches of another size, as a PPO learner would:
        parts = [
            p.log_prob(
                {"state/x": obs["state/x"][i : i + 16]},
                out["chain"][i : i + 16],
                mode=mode,
                k_star=None if k_star is None else k_star[i : i + 16],
            )
            for i in range(0, 64, 16)
        ]
    ratio = torch.exp(lp.sum(1) - out["log_prob"].sum(1))
    assert torch.allclose(ratio, torch.ones_like(ratio), atol=1e-5)
    ratio_mb = torch.exp(torch.cat(parts).sum(1) - out["log_prob"].sum(1))
    assert torch.allclose(ratio_mb, torch.ones_like(ratio_mb), atol=1e-5)
    if mode == "sde":  # hybrid: exactly one stochastic step per sample, the stored one
        assert (out["stochastic"].sum(1) == 1).all()
        assert (out["stochastic"].float().argmax(1) == k_star).all()


def test_log_prob_moves_when_weights_move():
    p = _policy(num_steps=4)
    obs = _obs(8)
    with torch.no_grad():
        out = p.sample_chain(obs, mode="noise_net")
        for prm in p.net.parameters():
            prm.add_(0.05 * torch.randn_like(prm))
        lp = p.log_prob(obs, out["chain"], mode="noise_net")
    assert not torch.allclose(lp, out["log_prob"])


def test_flow_noise_std_stays_inside_its_bounds():
    p = _policy(num_steps=4, noise_std_bounds=(0.08, 0.16))
    with torch.no_grad():
        for prm in p.noise_head.parameters():
            prm.normal_(0, 100.0)  # push the head to its extremes
        x = torch.randn(16, 4, 2)
        v, feat = p.net(x, torch.ones(16), p.encode(_obs(16)))
        _, std = p.transition(x, v, feat, torch.ones(16), "noise_net")
    assert std.min() >= 0.08 - 1e-7 and std.max() <= 0.16 + 1e-7
    assert std.min() < 0.081 and std.max() > 0.159


def test_gaussian_log_prob_matches_torch():
    x, mu, std = torch.randn(5, 3, 2), torch.randn(5, 3, 2), torch.rand(5, 3, 2) + 0.1
    ref = torch.distributions.Normal(mu.double(), std.double()).log_prob(x.double()).sum((1, 2))
    assert torch.allclose(gaussian_log_prob(x, mu, std), ref)


@pytest.mark.slow
def test_bc_fits_a_conditional_target():
    """Actions = a fixed function of the state: a few hundred steps fit it closely."""
    torch.manual_seed(0)
    w = torch.randn(3, 2) * 0.3
    stats = {
        "state/x": {"mean": np.zeros(3), "std": np.ones(3)},
        "action": {"min": -np.ones(2), "max": np.ones(2)},
    }
    p = _policy(num_steps=10, stats=stats)
    opt = torch.optim.Adam(p.parameters(), lr=2e-3)
    for step in range(800):
        obs = _obs(128, seed=step)
        target = torch.tanh(obs["state/x"][:, -1] @ w)[:, None].expand(128, 4, 2)
        loss, logs = p.compute_loss({"obs": obs, "action": target})
        opt.zero_grad()
        loss.backward()
        opt.step()
    p.eval()
    obs = _obs(256, seed=10_000)
    target = torch.tanh(obs["state/x"][:, -1] @ w)[:, None].expand(256, 4, 2)
    err = (p.predict_chunk(obs) - target).abs().mean().item()
    assert err < 0.05, err
    assert math.isfinite(logs["loss"])


def test_bad_inputs_are_clear_errors():
    p = _policy()
    with pytest.raises(ValueError, match=r"expected \(B, To=2, D\)"):
        p.predict_chunk({"state/x": torch.zeros(3, 3)})
    with pytest.raises(KeyError, match="state/x"):
        p.predict_chunk({"state/y": torch.zeros(3, 2, 3)})
    with pytest.raises(ValueError, match="mode"):
        p.sample_chain(_obs(2), mode="euler")
    with pytest.raises(ValueError, match="chain must be"):
        p.log_prob(_obs(2), torch.zeros(2, 3, 4, 2))


def test_predict_chunk_equals_the_ode_chain():
    p = _policy(num_steps=4).eval()
    obs, noise = _obs(8), torch.randn(8, 4, 2)
    with torch.no_grad():
        chain = p.sample_chain(obs, noise=noise, mode="ode")["action"]
    assert torch.allclose(p.predict_chunk(obs, noise=noise), chain, atol=1e-6)


def test_noise_scale_zero_makes_predict_chunk_deterministic():
    """noise_scale scales the sampler's initial noise: 0 runs the ODE from the prior's mean
    (the chunk for x_1 = 0), 1 samples; it is a run-time setting, not part of the config."""
    p = _policy(num_steps=4).eval()
    obs = _obs(8)
    p.noise_scale = 0.0
    a, b = p.predict_chunk(obs), p.predict_chunk(obs)
    assert torch.equal(a, b)
    assert torch.allclose(a, p.predict_chunk(obs, noise=torch.zeros(8, 4, 2)))
    p.noise_scale = 1.0
    assert not torch.equal(p.predict_chunk(obs), p.predict_chunk(obs))
    assert "noise_scale" not in p.config
