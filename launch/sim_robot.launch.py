"""The MuJoCo sim robot alone, speaking the robot's topics (franka_ros2 names) over DDS, so the
whole hardware path (bridge, policy, teleop, recorder) runs on one machine.

    ros2 launch launch/sim_robot.launch.py task:=lift lockstep:=false
"""

import os

from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.substitutions import LaunchConfiguration

from launch import LaunchDescription

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config")


def generate_launch_description() -> LaunchDescription:
    arg = LaunchConfiguration
    args = [
        DeclareLaunchArgument(
            "params_file",
            default_value=os.path.join(CONFIG, "sim_robot.yaml"),
            description="parameter YAML of the sim robot node",
        ),
        DeclareLaunchArgument("task", default_value="lift", description="sim task"),
        DeclareLaunchArgument(
            "state_hz", default_value="1000.0", description="state publish rate [Hz]"
        ),
        DeclareLaunchArgument(
            "lockstep",
            default_value="false",
            description="step once per /robotrl/action message instead of in real time",
        ),
        DeclareLaunchArgument("seed", default_value="0", description="first episode seed"),
    ]
    sim_robot = ExecuteProcess(
        cmd=[
            "robotrl-sim-robot",
            "--ros-args",
            "--params-file",
            arg("params_file"),
            "-r",
            "__node:=robotrl_sim_robot",
            "-p",
            ["task:=", arg("task")],
            "-p",
            ["state_hz:=", arg("state_hz")],
            "-p",
            ["lockstep:=", arg("lockstep")],
            "-p",
            ["seed:=", arg("seed")],
        ],
        name="robotrl_sim_robot",
        output="screen",
    )
    return LaunchDescription([*args, sim_robot])
