"""Policy deployment with safety: the policy node runs a checkpoint at the policy rate and sends
commands through the deterministic safety filter and the stale-state watchdog (+ optional
recorder and sim robot).

    ros2 launch launch/policy_deploy.launch.py checkpoint:=outputs/.../checkpoint episodes:=10
    ros2 launch launch/policy_deploy.launch.py checkpoint:=<vla> instruction:="lift the red cube"
"""

import os

from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import LaunchConfiguration

from launch import LaunchDescription

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config")


def generate_launch_description() -> LaunchDescription:
    arg = LaunchConfiguration
    args = [
        DeclareLaunchArgument(
            "params_file",
            default_value=os.path.join(CONFIG, "policy_deploy.yaml"),
            description="parameter YAML of the policy and recorder nodes",
        ),
        DeclareLaunchArgument(
            "checkpoint", description="checkpoint directory of the policy (required)"
        ),
        DeclareLaunchArgument(
            "profile", default_value="franka", description="topic profile: franka|generic|sim"
        ),
        DeclareLaunchArgument(
            "policy_hz",
            default_value="20.0",
            description="policy step rate [Hz]: the rate the policy was trained at",
        ),
        DeclareLaunchArgument(
            "episodes", default_value="0", description="episodes to run (0: until stopped)"
        ),
        DeclareLaunchArgument(
            "state_timeout_s", default_value="0.05", description="watchdog bound [s]"
        ),
        DeclareLaunchArgument(
            "record", default_value="false", description="also record episodes to out"
        ),
        DeclareLaunchArgument(
            "out", default_value="data/policy_rollouts", description="zarr store when record"
        ),
        DeclareLaunchArgument(
            "use_sim", default_value="false", description="also start robotrl-sim-robot"
        ),
        DeclareLaunchArgument(
            "task", default_value="lift", description="sim task when use_sim (and metadata)"
        ),
        DeclareLaunchArgument(
            "instruction",
            default_value="",
            description="task instruction of a language-conditioned policy (or publish it on "
            "/robotrl/instruction; the sim robot publishes its episode's)",
        ),
        DeclareLaunchArgument(
            "sim_cameras",
            default_value="[]",
            description="cameras the sim robot renders when use_sim, e.g. [table,wrist]",
        ),
        DeclareLaunchArgument(
            "sim_image_size",
            default_value="[96,96]",
            description="(H, W) of the sim robot's camera images",
        ),
    ]
    common = [
        "--ros-args",
        "--params-file",
        arg("params_file"),
        "-p",
        ["profile:=", arg("profile")],
    ]
    policy_cmd = [
        "robotrl-policy-node",
        *common,
        "-r",
        "__node:=robotrl_policy",
        "-p",
        ["checkpoint:=", arg("checkpoint")],
        "-p",
        ["policy_hz:=", arg("policy_hz")],
        "-p",
        ["episodes:=", arg("episodes")],
        "-p",
        ["state_timeout_s:=", arg("state_timeout_s")],
        "-p",
        ["instruction:='", arg("instruction"), "'"],  # a YAML string, empty included
    ]
    policy = ExecuteProcess(
        cmd=policy_cmd,
        name="robotrl_policy",
        output="screen",
        condition=UnlessCondition(arg("use_sim")),
    )
    # On the sim robot the policy also reads the task's object state (task_state topic).
    policy_on_sim = ExecuteProcess(
        cmd=[*policy_cmd, "-p", ["task:=", arg("task")]],
        name="robotrl_policy",
        output="screen",
        condition=IfCondition(arg("use_sim")),
    )
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
        ],
        name="robotrl_recorder",
        output="screen",
        condition=IfCondition(arg("record")),
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
            ["cameras:=", arg("sim_cameras")],
            "-p",
            ["image_size:=", arg("sim_image_size")],
        ],
        name="robotrl_sim_robot",
        output="screen",
        condition=IfCondition(arg("use_sim")),
    )
    return LaunchDescription([*args, sim_robot, policy, policy_on_sim, recorder])
