import numpy as np
import pytest
import torch

from policies.diffusion import DiffusionPolicy


@pytest.mark.slow
def test_ddim_fits_a_conditional_target():
    torch.manual_seed(0)
    w = torch.randn(3, 2) * 0.3
    stats = {
        "state/x": {"mean": np.zeros(3), "std": np.ones(3)},
        "action": {"min": -np.ones(2), "max": np.ones(2)},
    }
    p = DiffusionPolicy(
        {"state/x": 3}, action_dim=2, action_horizon=4, hidden=64, obs_feature_dim=64, stats=stats
    )
    opt = torch.optim.Adam(p.parameters(), lr=2e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(1000):
        x = torch.randn(128, 2, 3, generator=g)
        target = torch.tanh(x[:, -1] @ w)[:, None].expand(128, 4, 2)
        loss, _ = p.compute_loss({"obs": {"state/x": x}, "action": target})
        opt.zero_grad()
        loss.backward()
        opt.step()
    p.eval()
    x = torch.randn(256, 2, 3, generator=g)
    target = torch.tanh(x[:, -1] @ w)[:, None].expand(256, 4, 2)
    err = (p.predict_chunk({"state/x": x}, generator=g) - target).abs().mean().item()
    assert err < 0.08, err


def test_schedules_and_validation():
    p = DiffusionPolicy(
        {"state/x": 3}, action_dim=2, action_horizon=4, hidden=32, obs_feature_dim=32
    )
    assert p.train_scheduler.config.num_train_timesteps == 100 and p.num_steps == 10
    out = p.predict_chunk({"state/x": torch.zeros(2, 2, 3)})
    assert out.shape == (2, 4, 2) and out.abs().max() <= 1.0
    with pytest.raises(ValueError, match="num_inference_steps"):
        DiffusionPolicy({"state/x": 3}, num_inference_steps=0)
    with pytest.raises(ValueError, match=r"\(B, Ta=4, Da=2\)"):
        p.compute_loss({"obs": {"state/x": torch.zeros(2, 2, 3)}, "action": torch.zeros(2, 3, 2)})


def test_noise_scale_zero_makes_ddim_deterministic():
    p = DiffusionPolicy({"state/x": 3}, action_dim=2, action_horizon=4, hidden=32).eval()
    x = {"state/x": torch.randn(5, 2, 3)}
    p.noise_scale = 0.0
    assert torch.equal(p.predict_chunk(x), p.predict_chunk(x))
    p.noise_scale = 1.0
    assert not torch.equal(p.predict_chunk(x), p.predict_chunk(x))
