"""SafetyTally: the training steps' constraint costs, from one env's or a vector env's info."""

import numpy as np
import pytest

from robotrl.safety_tally import SafetyTally


def _info(cost, force, workspace=0, joint_limit=0):
    return {
        "success": False,
        "safety": {
            "cost": cost,
            "violation_force": force,
            "violation_workspace": workspace,
            "violation_joint_limit": joint_limit,
            "force_max": 12.0,
        },
    }


def test_counts_steps_and_violations_of_one_env():
    tally = SafetyTally()
    tally.add(_info(0, False))
    tally.add(_info(1, True, workspace=True))
    tally.add(_info(1, False, joint_limit=True))
    assert tally.counts == {
        "steps": 3,
        "violation_steps": 2,
        "violation_force": 1,
        "violation_workspace": 1,
        "violation_joint_limit": 1,
    }
    assert tally.per_1000_steps() == pytest.approx(2000 / 3)
    summary = tally.summary("monitor")
    assert summary["safety"] == "monitor"
    assert summary["train_safety"]["per_1000_steps"] == pytest.approx(666.667)
    assert tally.summary("off") == {}


def test_counts_every_env_of_a_vector_step():
    tally = SafetyTally()
    tally.add(_info(np.array([1, 0, 1]), np.array([True, False, False])))
    assert tally.counts["steps"] == 3 and tally.counts["violation_steps"] == 2
    assert tally.counts["violation_force"] == 1 and tally.counts["violation_workspace"] == 0


def test_steps_without_a_cost_are_not_counted():
    """safety=off: the filter's flags only, no constraint cost."""
    tally = SafetyTally()
    tally.add({"success": True, "safety": {"clipped": True}})
    tally.add({"success": True})
    assert tally.counts["steps"] == 0 and tally.per_1000_steps() == 0.0
