"""Node parameters: ROS 2 parameter YAML (``/**`` merged under the node's section) and ROS 2
command lines load into typed configs; unknown keys and bad types are errors listing what is
valid."""

from __future__ import annotations

import pytest

from hardware.ros2.config import BridgeConfig, RecorderConfig, TeleopNodeConfig
from hardware.ros2.node_params import ConfigError

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
