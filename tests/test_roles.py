"""The Learner / Actor protocols the residual trainer implements to run split."""

from __future__ import annotations

import pytest

pytest.importorskip("zmq", reason="robotrl.distributed needs the 'dist' extra (pyzmq)")

from bandit_demo import BanditActor, BanditLearner

from robotrl.distributed import Actor, Learner


def test_demo_roles_satisfy_the_protocols():
    assert isinstance(BanditLearner(), Learner) and not isinstance(BanditLearner(), Actor)
    assert isinstance(BanditActor(), Actor) and not isinstance(BanditActor(), Learner)


def test_a_torch_module_fits_both_protocol_shapes():
    torch = pytest.importorskip("torch")
    assert isinstance(torch.nn.Linear(2, 2), Actor)
