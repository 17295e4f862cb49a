"""The Learner / Actor protocols the residual trainer implements to run split."""

from __future__ import annotations

import pytest
from ray_learner import Collect

from robotrl.algos.residual import ResidualAgent, ResidualConfig
from robotrl.algos.residual_actor import ResidualActor
from robotrl.distributed import Actor, Learner


def test_test_and_residual_roles_satisfy_the_protocols():
    assert isinstance(Collect(), Learner) and not isinstance(Collect(), Actor)
    actor = ResidualActor(ResidualAgent(4, 2, ResidualConfig(hidden=8, ensemble=2)))
    assert isinstance(actor, Actor) and not isinstance(actor, Learner)


def test_a_torch_module_fits_both_protocol_shapes():
    torch = pytest.importorskip("torch")
    assert isinstance(torch.nn.Linear(2, 2), Actor)
