"""Human-in-the-loop RL with the actor on the robot PC: ``robotrl train-rl role=actor`` streams
transitions to the learner (a Ray actor on a GPU box that joined the same Ray cluster, or
``start_learner:=true`` on this machine) and acts with the latest weights; the human takes over
with the teleop device (interventions go to both the online and the demo buffer). The actor
steps the robot over ROS 2 (``backend=ros2``: the robot env on the ``profile``'s topics,
settings from ``params_file``); ``use_sim:=true`` also starts the sim robot (then
``profile:=sim``).

    ray start --address=<gpu-box>:6379      # once: this PC joins the GPU box's Ray cluster
    ros2 launch launch/hil_rl_actor.launch.py checkpoint:=outputs/.../checkpoint \\
        human:=spacemouse

(``RAY_AUTH_MODE=token`` and the cluster's ``~/.ray/auth_token`` on this PC: docs/hardware.md.)
"""

import os

from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration

from launch import LaunchDescription

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config")


def generate_launch_description() -> LaunchDescription:
    arg = LaunchConfiguration
    args = [
        DeclareLaunchArgument(
            "checkpoint", description="base policy checkpoint (a train-bc checkpoint, required)"
        ),
        DeclareLaunchArgument(
            "params_file",
            default_value=os.path.join(CONFIG, "hil_rl_actor.yaml"),
            description="parameter YAML of the actor's robot env (section robotrl_robot_env)",
        ),
        DeclareLaunchArgument(
            "profile", default_value="franka", description="topic profile: franka|generic|sim"
        ),
        DeclareLaunchArgument(
            "ray_address",
            default_value="auto",
            description="Ray cluster the learner runs in (auto: the one this PC joined)",
        ),
        DeclareLaunchArgument(
            "learner", default_value="robotrl-learner", description="the learner's Ray actor name"
        ),
        DeclareLaunchArgument(
            "human",
            default_value="spacemouse",
            description="operator: none|scripted|keyboard|spacemouse|gamepad",
        ),
        DeclareLaunchArgument(
            "actor_id", default_value="robot0", description="stable name of this actor"
        ),
        DeclareLaunchArgument(
            "actor_hz", default_value="20.0", description="env steps per second of the actor"
        ),
        DeclareLaunchArgument(
            "total_steps", default_value="20000", description="env steps of the run"
        ),
        DeclareLaunchArgument(
            "start_learner",
            default_value="false",
            description="also start the learner on this machine",
        ),
        DeclareLaunchArgument(
            "use_sim", default_value="false", description="also start robotrl-sim-robot"
        ),
        DeclareLaunchArgument("task", default_value="lift", description="sim task when use_sim"),
    ]
    actor = ExecuteProcess(
        cmd=[
            "robotrl",
            "train-rl",
            "role=actor",
            "backend=ros2",
            ["ros2.profile=", arg("profile")],
            ["ros2.params_file=", arg("params_file")],
            ["ray.address=", arg("ray_address")],
            ["dist.learner=", arg("learner")],
            ["checkpoint=", arg("checkpoint")],
            ["human=", arg("human")],
            ["dist.actor_id=", arg("actor_id")],
            ["dist.actor_hz=", arg("actor_hz")],
            ["total_steps=", arg("total_steps")],
            "name=hil-actor",
        ],
        name="robotrl_actor",
        output="screen",
    )
    learner = ExecuteProcess(
        cmd=[
            "robotrl",
            "train-rl",
            "role=learner",
            ["ray.address=", arg("ray_address")],
            ["dist.learner=", arg("learner")],
            ["checkpoint=", arg("checkpoint")],
            ["total_steps=", arg("total_steps")],
            "name=hil-learner",
        ],
        name="robotrl_learner",
        output="screen",
        condition=IfCondition(arg("start_learner")),
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
        ],
        name="robotrl_sim_robot",
        output="screen",
        condition=IfCondition(arg("use_sim")),
    )
    return LaunchDescription([*args, sim_robot, learner, actor])
