"""Node configs: ROS 2 parameter YAML and command lines load into typed dataclasses; unknown
keys, bad types and bad values are errors that say what is valid."""

from __future__ import annotations

import pytest

from hardware.ros2.config import (
    NODE_CONFIGS,
    BridgeConfig,
    ConfigError,
    PolicyNodeConfig,
    RecorderConfig,
    SimRobotConfig,
    TeleopNodeConfig,
)

YAML = """
/**:
  ros__parameters:
    profile: generic
robotrl_bridge:
  ros__parameters:
    control_hz: 10
    workspace_low: [0.1, -0.3, 0.0]
    topics:
      ee_pose: /my_arm/pose
other_node:
  ros__parameters:
    x: 1
"""


def test_yaml_section_merges_over_wildcard_and_converts_types(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(YAML)
    cfg = BridgeConfig.from_yaml(f)
    assert cfg.profile == "generic" and cfg.control_hz == 10.0
    assert isinstance(cfg.control_hz, float) and cfg.workspace_low == (0.1, -0.3, 0.0)
    topics = cfg.topic_profile()
    assert topics.ee_pose == "/my_arm/pose" and topics.equilibrium_pose == "/target_pose"
    assert TeleopNodeConfig.from_yaml(f).profile == "generic"  # /** applies to every node
    g = tmp_path / "q.yaml"
    g.write_text("robotrl_bridge:\n  ros__parameters: {}\n")
    with pytest.raises(ConfigError, match="no section for node 'robotrl_teleop'"):
        TeleopNodeConfig.from_yaml(g)
    with pytest.raises(ConfigError, match=r"unknown parameters \['x'\].*valid: \["):
        TeleopNodeConfig.from_yaml(f, "other_node")


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


def test_ros_command_line(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("rec:\n  ros__parameters:\n    fps: 10.0\n    cameras: [front]\n")
    cfg, name = RecorderConfig.from_args(
        [
            "task=lift",
            "--ros-args",
            "--params-file",
            str(f),
            "-r",
            "__node:=rec",
            "-p",
            "episodes:=3",
            "-p",
            "topics.action:=/a",
            "--log-level",
            "info",
        ]
    )
    assert name == "rec" and (cfg.fps, cfg.cameras, cfg.episodes, cfg.task) == (
        10.0,
        ("front",),
        3,
        "lift",
    )
    assert cfg.topic_profile().action == "/a"
    with pytest.raises(ConfigError, match="unexpected argument '--verbose'"):
        RecorderConfig.from_args(["--verbose"])
    with pytest.raises(ConfigError, match="only '-r __node:=<name>'"):
        RecorderConfig.from_args(["--ros-args", "-r", "/a:=/b"])


def test_every_node_config_round_trips_through_params():
    for cls in NODE_CONFIGS.values():
        cfg = cls()
        assert cls.from_params(cfg.to_params()) == cfg
    assert SimRobotConfig().profile == "sim"
