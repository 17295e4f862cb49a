"""Policy base class: every registered policy is one, declares the interface, and a checkpoint
loads back as one; the VLA is composed of its own parts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from policies.base import Policy
from policies.checkpoint import load_policy
from policies.flow_matching import FlowChainPolicy
from policies.registry import POLICIES, policy_class

GOLDEN = Path(__file__).parent / "data" / "golden_flow" / "checkpoint"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_registered_policy_is_a_policy(name) -> None:
    cls = policy_class(name)
    assert issubclass(cls, Policy) and cls.policy_type == name


def test_the_interface_is_enforced() -> None:
    class NoPredict(Policy):
        policy_type = "x"

        def compute_loss(self, batch):
            return torch.zeros(()), {}

    with pytest.raises(TypeError, match="predict_chunk"):
        NoPredict()  # type: ignore[abstract]


def test_a_checkpoint_loads_as_a_policy() -> None:
    policy, _ = load_policy(GOLDEN)
    assert isinstance(policy, FlowChainPolicy)
    assert policy.device == torch.device("cpu")
    policy.reset()  # stateless: a no-op


def test_vla_holds_only_its_own_parts() -> None:
    vla = policy_class("vla")(
        {"state/ee_pos": 3}, image_keys=["images/front"], vocab=["lift"], dim=32, heads=4
    )
    assert isinstance(vla, FlowChainPolicy)
    names = {n.split(".")[0] for n, _ in vla.named_parameters()}
    assert names == {"encoder", "net", "noise_head"}
    assert type(vla.encoder).__name__ == "PrefixEncoder"
    assert type(vla.net).__name__ == "TransformerExpert"
    assert all("_none" not in k for k in vla.state_dict())  # no placeholder of a parent
