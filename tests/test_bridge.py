"""Bridge node over DDS against a ``robotrl-sim-robot`` process: actions become safety-filtered
equilibrium poses; SIGKILLing the sim robot mid-run makes the bridge hold within 50 ms, refuse
actions and say why; restarting the sim robot resumes the same bridge."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
from waits import eventually

pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")

from ros2_fakes import FakeTransport

from hardware.ros2 import messages as m
from hardware.ros2.bridge import BridgeNode
from hardware.ros2.config import BridgeConfig, ConfigError
from hardware.ros2.pose_commander import STATUS_TOPIC
from hardware.ros2.topics import SIM
from hardware.ros2.transport import CycloneTransport, loopback_config

pytestmark = pytest.mark.ros2

TIMEOUT_S = 0.02  # watchdog bound of the kill test [s]; the sim robot publishes at 500 Hz


def _wait(pred, timeout: float) -> bool:
    return eventually(pred, timeout)


def test_joint_torque_mode_is_refused_honestly() -> None:
    with pytest.raises(ConfigError, match="joint_torque is not implemented"):
        BridgeNode(BridgeConfig(profile="sim", command="joint_torque"), FakeTransport())


def test_bad_actions_are_counted_not_applied() -> None:
    bus = FakeTransport()
    node = BridgeNode(BridgeConfig(profile="sim"), bus)
    try:
        bus.publisher(SIM.action, m.Float64MultiArray).publish(m.Float64MultiArray(data=[0.0]))
        assert node.stats.refused == 1 and node.stats.applied == 0
        assert node.apply(np.zeros(7)) is False  # no state yet: refused
    finally:
        node.close()


@pytest.mark.slow
def test_kill_holds_within_50_ms_and_restart_resumes() -> None:
    os.environ.setdefault("CYCLONEDDS_URI", loopback_config())
    domain = random.randint(1, 230)
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), OMP_NUM_THREADS="1")
    cmd = ["robotrl-sim-robot", "--ros-args", "-p", "profile:=sim", "-p", "task:=reach"]
    cmd += ["-p", "state_hz:=500.0"]

    def start_sim() -> subprocess.Popen:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)

    bridge_tr = CycloneTransport(domain, "bridge")
    policy_tr = CycloneTransport(domain, "policy")
    node = BridgeNode(BridgeConfig(profile="sim", state_timeout_s=TIMEOUT_S), bridge_tr)
    thread = threading.Thread(target=node.run, daemon=True)
    thread.start()
    status: list[str] = []
    poses: list[m.PoseStamped] = []
    policy_tr.subscribe(STATUS_TOPIC, m.String, lambda msg: status.append(msg.data))
    policy_tr.subscribe(SIM.equilibrium_pose, m.PoseStamped, poses.append)
    action = policy_tr.publisher(SIM.action, m.Float64MultiArray)
    push = m.Float64MultiArray(data=[0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    sim_proc = start_sim()
    try:
        # the robot is up: fresh state for a while, actions applied
        assert _wait(lambda: not node.watchdog.held, 60.0), node.watchdog.reason
        assert _wait(lambda: action.matched_count() == 1, 10.0)
        end = time.monotonic() + 5.0  # until discovery has matched every endpoint
        while (len(poses) < 5 or node.stats.applied < 5) and time.monotonic() < end:
            action.publish(push)
            time.sleep(0.05)
        assert len(poses) >= 5 and node.stats.applied >= 5
        for _ in range(50):  # a moment without a (load-induced) hold before the kill
            if _wait(lambda: node.watchdog.held, 0.3) is False:
                break

        sim_proc.send_signal(signal.SIGKILL)
        sim_proc.wait()
        # the robot is gone: a hold starts and lasts (its latency, TIMEOUT_S + poll after the
        # last state, is the watchdog's logic, tested on a fake clock in test_pose_commander)
        assert _wait(lambda: node.watchdog.held, 10.0)
        final = node.watchdog.state.events[-1]
        assert node.watchdog.held and final.end is None
        reason = node.watchdog.reason
        assert f"ms old > {TIMEOUT_S * 1e3:.0f} ms bound" in reason
        assert _wait(lambda: f"hold: {reason}" in status, 1.0)
        assert node.stats.hold_reasons[-1] == reason

        # held: actions are refused, nothing new goes to the robot
        time.sleep(0.1)
        n_poses, refused = len(poses), node.stats.refused
        for _ in range(3):
            action.publish(push)
            time.sleep(0.05)
        assert _wait(lambda: node.stats.refused >= refused + 3, 2.0)
        assert len(poses) == n_poses

        # restart the robot: the same bridge resumes and applies actions again
        sim_proc = start_sim()
        assert _wait(lambda: not node.watchdog.held, 60.0), node.watchdog.reason
        assert _wait(lambda: status[-1] == "ok", 2.0)
        applied = node.stats.applied
        for _ in range(3):
            action.publish(push)
            time.sleep(0.05)
        assert _wait(lambda: node.stats.applied >= applied + 2, 5.0)
        assert _wait(lambda: len(poses) > n_poses, 2.0)
    finally:
        sim_proc.kill()
        sim_proc.wait()
        node.close()
        thread.join(timeout=5)
        bridge_tr.close()
        policy_tr.close()


def test_the_bridge_reflex_checks_actions_and_rechecks_between_them(tmp_path) -> None:
    from reflex_weights import pushing_down_low_critic

    from hardware.ros2.observation import state_messages

    critic = tmp_path / "risk.npz"
    np.savez(critic, **pushing_down_low_critic(z_limit=0.15))
    bus = FakeTransport()
    # lockstep: no reflex thread, the test ticks it
    node = BridgeNode(BridgeConfig(profile="sim", lockstep=True, safety_critic=str(critic)), bus)
    pubs: dict = {}

    def publish_state(z: float, t_ns: int) -> None:
        obs = {
            "state/joint_pos": np.zeros(7),
            "state/joint_vel": np.zeros(7),
            "state/ee_pos": np.array([0.5, 0.0, z]),
            "state/ee_quat": np.array([0.0, 1.0, 0.0, 0.0]),
            "state/ee_twist": np.zeros(6),
            "state/wrench": np.zeros(6),
            "state/gripper": np.array([0.04]),
        }
        for topic, msg in state_messages(obs, t_ns, SIM).items():
            pubs.setdefault(topic, bus.publisher(topic, type(msg))).publish(msg)

    try:
        down = np.array([0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0])
        assert node.reflex_tick() is False  # nothing commanded yet
        publish_state(0.16, 1)
        assert node.apply(down) and node.stats.reflex_steps == 0
        # the watchdog noticing the fresh state only now does not make the reflex forget it
        node.watchdog.tick()
        assert node.reflex_tick() and node.stats.reflex_ticks == 0  # checked: still safe
        publish_state(0.12, 2)  # the arm went on down: the last command is risky now
        node.reflex_tick()
        assert (node.stats.reflex_steps, node.stats.reflex_ticks) == (1, 1)
        pose = bus.sent[SIM.equilibrium_pose][-1].pose.position
        assert pose.z == pytest.approx(0.12)  # held where it is
        assert node.apply(down) and (node.stats.reflex_steps, node.stats.reflex_ticks) == (2, 2)
    finally:
        node.close()
    with pytest.raises(ConfigError, match="safety_threshold"):
        BridgeConfig(profile="sim", safety_threshold=1.5).validate()
