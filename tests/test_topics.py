"""Topic profiles (franka_ros2 / ros2_control names), task-state naming and action tags."""

from __future__ import annotations

import pytest

from hardware.ros2.topics import (
    FRANKA,
    PROFILES,
    SIM,
    SIM_CAMERAS,
    ConfigError,
    QosChoice,
    action_tag,
    parse_action_tag,
    task_state_names,
    task_state_sizes,
    topic_profile,
)


def test_franka_profile_uses_franka_ros2_names():
    assert FRANKA.joint_states == "/joint_states"
    assert FRANKA.ee_pose == "/franka_robot_state_broadcaster/current_pose"
    assert FRANKA.wrench == "/franka_robot_state_broadcaster/external_wrench_in_base_frame"
    assert FRANKA.equilibrium_pose.endswith("/equilibrium_pose")
    assert FRANKA.gripper_move_action == "/franka_gripper/move"
    assert FRANKA.arm_joints[0] == "fr3_joint1" and len(FRANKA.arm_joints) == 7
    assert PROFILES["generic"].equilibrium_pose == "/target_pose"
    # the sim speaks the franka names, plus what a real Franka lacks
    same = {
        k: v for k, v in SIM.all_topics().items() if k != "ee_twist" and not k.startswith("camera.")
    }
    assert same == FRANKA.all_topics() and SIM.ee_twist and not FRANKA.ee_twist
    assert set(SIM.camera_topics) == set(SIM_CAMERAS) and not FRANKA.cameras


def test_every_topic_is_absolute_and_unique_per_profile():
    for p in PROFILES.values():
        topics = list(p.all_topics().values())
        assert all(t.startswith("/") for t in topics)
        assert len(topics) == len(set(topics)), p.name


def test_overrides_and_errors():
    p = topic_profile("franka", {"cameras": {"wrist": "/cam/wrist/image_raw"}})
    assert p.camera_topics == {"wrist": "/cam/wrist/image_raw"}
    assert p.all_topics()["camera.wrist"] == "/cam/wrist/image_raw"
    with pytest.raises(ConfigError, match="unknown topic profile"):
        topic_profile("kuka")
    with pytest.raises(ConfigError, match="reliability"):
        QosChoice("sometimes")


def test_task_state_names_and_action_tags_round_trip():
    names = task_state_names({"cube_pos": 3, "cube_quat": 4})
    assert names[:4] == ["cube_pos/0", "cube_pos/1", "cube_pos/2", "cube_quat/0"]
    assert task_state_sizes(names) == {"cube_pos": 3, "cube_quat": 4}
    with pytest.raises(ConfigError, match="not '<key>/<index>' in order"):
        task_state_sizes(["a/0", "a/2"])
    with pytest.raises(ConfigError, match="not contiguous"):
        task_state_sizes(["a/0", "b/0", "a/1"])
    assert parse_action_tag(action_tag(12, 34, True)) == (12, 34, True)
    assert parse_action_tag("action") is None
    assert parse_action_tag("robotrl:seed=x") is None
