"""Node configs: defaults, per-node value checks with errors that say what is valid."""

from __future__ import annotations

import pytest

from hardware.ros2.config import (
    NODE_CONFIGS,
    BridgeConfig,
    ConfigError,
    PolicyNodeConfig,
    SimRobotConfig,
)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"control_hz": "fast"}, "control_hz must be float"),
        ({"control_hz": -1.0}, "control_hz must be positive"),
        ({"command": "velocity"}, "command must be equilibrium_pose|joint_torque"),
        ({"workspace_low": [0.9, 0, 0]}, "workspace_low must be below workspace_high"),
        ({"stiffness": [1.0, 2.0]}, "stiffness must be empty or 6 values"),
        ({"profile": "ur5"}, "unknown topic profile 'ur5'"),
        ({"topics": {"joint_state": "/x"}}, r"unknown topics \['joint_state'\]"),
        ({"max_episode_steps": True}, "max_episode_steps must be int"),
    ],
)
def test_bad_bridge_parameters_are_rejected(params, message):
    with pytest.raises(ConfigError, match=message):
        BridgeConfig.from_params(params)


def test_policy_rate_cannot_exceed_control_rate():
    with pytest.raises(ConfigError, match=r"policy_hz \(30.0\) must not exceed control_hz"):
        PolicyNodeConfig(policy_hz=30.0)


def test_every_node_config_round_trips_through_params():
    for cls in NODE_CONFIGS.values():
        cfg = cls()
        assert cls.from_params(cfg.to_params()) == cfg
    assert SimRobotConfig().profile == "sim"
