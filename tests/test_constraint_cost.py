"""Constraint costs: force, workspace and joint-limit checks; NaN fails closed; counts."""

import numpy as np
import pytest

from controllers import panda
from controllers.constraint_cost import CONSTRAINTS, ConstraintCost

LOW, HIGH = np.array([0.2, -0.45, 0.015]), np.array([0.8, 0.45, 0.7])
INSIDE = np.array([0.5, 0.0, 0.3])


def test_each_constraint_fires_alone_at_its_bound() -> None:
    c = ConstraintCost(LOW, HIGH, force_limit=30.0, workspace_margin=0.02, joint_margin=0.02)
    q = panda.Q_HOME.copy()
    assert c.check(INSIDE, 29.99, q) == 0 and not any(c.last.values())
    assert c.check(INSIDE, 30.01, q) == 1 and c.last == {
        "force": True,
        "workspace": False,
        "joint_limit": False,
    }
    assert c.check(np.array([0.5, 0.0, 0.72 - 1e-6]), 0.0, q) == 0  # inside the margin
    assert c.check(np.array([0.5, 0.0, 0.72 + 1e-6]), 0.0, q) == 1 and c.last["workspace"]
    q[3] = panda.Q_MAX[3] - 0.019  # 1.9 cm rad from the limit: inside the 2 cm margin
    assert c.check(INSIDE, 0.0, q) == 1 and c.last["joint_limit"] and not c.last["force"]
    assert c.counts == {"force": 1, "workspace": 1, "joint_limit": 1}
    c.reset_counts()
    assert c.counts == dict.fromkeys(CONSTRAINTS, 0)


def test_non_finite_measurements_are_violations() -> None:
    c = ConstraintCost(LOW, HIGH)
    assert c.check(INSIDE, float("nan"), panda.Q_HOME) == 1 and c.last["force"]
    assert c.check(np.array([np.nan, 0, 0.3]), 0.0, panda.Q_HOME) == 1 and c.last["workspace"]
    q = panda.Q_HOME.copy()
    q[0] = np.inf
    assert c.check(INSIDE, 0.0, q) == 1 and c.last["joint_limit"]


def test_invalid_construction() -> None:
    with pytest.raises(ValueError, match="workspace_low <= workspace_high"):
        ConstraintCost(HIGH, LOW)
    with pytest.raises(ValueError, match="force_limit > 0"):
        ConstraintCost(LOW, HIGH, force_limit=0.0)
    with pytest.raises(ValueError, match="q_min < q_max"):
        ConstraintCost(LOW, HIGH, q_min=panda.Q_MAX, q_max=panda.Q_MIN)
