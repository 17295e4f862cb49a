"""Teleop data collection on a robot: bridge + teleop node + recorder (+ optional sim robot).

The teleop node reads the device at the control rate and publishes the normalised action on
``/robotrl/action`` (plus twist and intervention flag) and, on a real arm, cuts the episodes
with the operator's success / failure keys; the bridge turns it into safety-filtered
equilibrium poses for the robot's Cartesian impedance controller; the recorder resamples the
robot's state and the executed action onto the control grid and commits each episode to the zarr
store. ``use_sim:=true`` also starts the MuJoCo sim robot speaking the same topics (and the
recorder then also records its objects' state, ``state/cube_pos`` ..., as ``robotrl collect``
does). The recorder alone counts ``episodes`` (an episode it had to discard, e.g. one that
began before it was up, does not count) and the whole launch shuts down when it exits.

    ros2 launch launch/collect_teleop.launch.py device:=spacemouse out:=data/pick.zarr task:=lift
"""

import os

from launch.actions import DeclareLaunchArgument, EmitEvent, ExecuteProcess, RegisterEventHandler
from launch.conditions import IfCondition, UnlessCondition
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration

from launch import LaunchDescription

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config")


def generate_launch_description() -> LaunchDescription:
    arg = LaunchConfiguration
    args = [
        DeclareLaunchArgument(
            "params_file",
            default_value=os.path.join(CONFIG, "collect_teleop.yaml"),
            description="parameter YAML of the bridge, teleop and recorder nodes",
        ),
        DeclareLaunchArgument(
            "profile", default_value="franka", description="topic profile: franka|generic|sim"
        ),
        DeclareLaunchArgument(
            "device", default_value="spacemouse", description="teleop device name"
        ),
        DeclareLaunchArgument(
            "out", default_value="data/teleop_session", description="zarr episode store"
        ),
        DeclareLaunchArgument("task", default_value="lift", description="task name (metadata)"),
        DeclareLaunchArgument("operator", default_value="", description="operator (metadata)"),
        DeclareLaunchArgument(
            "episodes",
            default_value="0",
            description="shut down after the recorder committed N episodes (0: never)",
        ),
        DeclareLaunchArgument(
            "control_hz", default_value="20.0", description="control / recording rate [Hz]"
        ),
        DeclareLaunchArgument(
            "use_sim", default_value="false", description="also start robotrl-sim-robot"
        ),
        DeclareLaunchArgument(
            "record_bag", default_value="false", description="also record a rosbag2 of the topics"
        ),
        DeclareLaunchArgument(
            "bag_path", default_value="bags/teleop_session", description="bag directory (new)"
        ),
    ]
    common = [
        "--ros-args",
        "--params-file",
        arg("params_file"),
        "-p",
        ["profile:=", arg("profile")],
    ]
    bridge = ExecuteProcess(
        cmd=[
            "robotrl-bridge",
            *common,
            "-r",
            "__node:=robotrl_bridge",
            "-p",
            ["control_hz:=", arg("control_hz")],
        ],
        name="robotrl_bridge",
        output="screen",
    )
    teleop_cmd = [
        "robotrl-teleop-node",
        *common,
        "-r",
        "__node:=robotrl_teleop",
        "-p",
        ["device:=", arg("device")],
        "-p",
        ["rate_hz:=", arg("control_hz")],
        "-p",
        ["task:=", arg("task")],
    ]
    # A real arm publishes no episode messages: the operator's ticks cut the episodes (the
    # device's success / failure keys). With use_sim the sim robot's task oracle ends them and
    # the teleop node resets the next one (auto_reset), as robotrl collect does.
    teleop = ExecuteProcess(
        cmd=[*teleop_cmd, "-p", "publish_episodes:=true"],
        name="robotrl_teleop",
        output="screen",
        condition=UnlessCondition(arg("use_sim")),
    )
    teleop_on_sim = ExecuteProcess(
        cmd=[
            *teleop_cmd,
            "-p",
            "publish_episodes:=false",
            "-p",
            "auto_reset:=true",
        ],
        name="robotrl_teleop",
        output="screen",
        condition=IfCondition(arg("use_sim")),
    )
    # in sim the episodes also hold the objects' state (state/cube_pos ...), as the sim's own
    # `robotrl collect` does: what a policy trained in sim reads, and RL's demo buffer needs
    recorder = ExecuteProcess(
        cmd=[
            "robotrl-recorder-node",
            *common,
            "-r",
            "__node:=robotrl_recorder",
            "-p",
            ["out:=", arg("out")],
            "-p",
            ["task:=", arg("task")],
            "-p",
            ["operator:=", arg("operator")],
            "-p",
            ["episodes:=", arg("episodes")],
            "-p",
            ["fps:=", arg("control_hz")],
            "-p",
            ["task_state:=", arg("use_sim")],
        ],
        name="robotrl_recorder",
        output="screen",
    )
    sim_robot = ExecuteProcess(
        cmd=[
            "robotrl-sim-robot",
            "--ros-args",
            "--params-file",
            os.path.join(CONFIG, "sim_robot.yaml"),
            "-r",
            "__node:=robotrl_sim_robot",
            "-p",
            ["task:=", arg("task")],
            "-p",
            ["control_hz:=", arg("control_hz")],
        ],
        name="robotrl_sim_robot",
        output="screen",
        condition=IfCondition(arg("use_sim")),
    )
    bag = ExecuteProcess(
        cmd=["robotrl-bag", "record", arg("bag_path"), "--profile", arg("profile")],
        name="robotrl_bag",
        output="screen",
        condition=IfCondition(arg("record_bag")),
    )
    # The recorder decides when the session is over: the teleop node keeps resetting episodes
    # until then (it cannot know which of them the recorder had to discard).
    shutdown = RegisterEventHandler(
        OnProcessExit(
            target_action=recorder,
            on_exit=[EmitEvent(event=Shutdown(reason="the recorder has its episodes"))],
        )
    )
    return LaunchDescription(
        [*args, sim_robot, bridge, teleop, teleop_on_sim, recorder, bag, shutdown]
    )
