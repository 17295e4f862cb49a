"""policies.registry: policy classes by name and the sampler's run-time noise scale."""

import pytest
import torch
from torch import nn

from policies.registry import has_noise_scale, make_policy, policy_class, set_noise_scale


def test_names_resolve_to_classes():
    assert policy_class("flow").__name__ == "FlowMatchingPolicy"
    p = make_policy("diffusion", state_dims={"state/x": 3}, action_dim=2, hidden=32)
    assert type(p).__name__ == "DiffusionPolicy"
    with pytest.raises(ValueError, match="unknown policy 'gpt'"):
        policy_class("gpt")


@pytest.mark.parametrize("name", ["flow", "diffusion"])
def test_set_noise_scale_sets_checked_values(name):
    p = make_policy(name, state_dims={"state/x": 3}, action_dim=2, hidden=32)
    set_noise_scale(p, "0")
    assert p.noise_scale == 0.0
    for bad in (-1.0, float("nan"), float("inf"), "fast"):
        with pytest.raises(ValueError, match="base_noise_scale must be a finite value >= 0"):
            set_noise_scale(p, bad, "base_noise_scale")
    assert p.noise_scale == 0.0  # a refused value leaves the setting as it was


def test_a_policy_without_a_noise_scale_refuses_anything_but_one():
    p = nn.Linear(2, 2)
    set_noise_scale(p, 1.0)  # the default is a no-op
    with pytest.raises(ValueError, match="Linear has no noise scale"):
        set_noise_scale(p, 0.0)
    assert not hasattr(p, "noise_scale") and torch.is_tensor(p.weight)


@pytest.mark.parametrize("name", ["flow", "diffusion", "distilled", "vla"])
def test_config_is_every_constructor_argument_and_rebuilds_the_policy(name):
    import inspect

    kw = {"state_dims": {"state/x": 3}, "action_dim": 2, "hidden": 32}
    if name == "vla":
        kw.update(vocab=["go", "left"], dim=32, heads=2, trunk_layers=1, expert_layers=1)
    p = make_policy(name, **kw)
    params = set(inspect.signature(type(p).__init__).parameters) - {"self", "stats"}
    assert set(p.config) == params  # nothing left out of a checkpoint by hand
    q = make_policy(name, **p.config)
    assert q.config == p.config
    assert {k: v.shape for k, v in q.state_dict().items()} == {
        k: v.shape for k, v in p.state_dict().items()
    }


def test_has_noise_scale_names_the_policies_with_a_sampler():
    assert has_noise_scale(make_policy("flow", state_dims={"state/x": 3}, action_dim=2, hidden=32))
    assert not has_noise_scale(object())
