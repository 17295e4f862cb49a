"""Sim robot node: lockstep steps equal the in-process env bit for bit (camera images and the
instruction of a language task too); in real time it publishes state and images at their rates,
tracks equilibrium pose / gripper / stiffness commands and resets by seed."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from waits import eventually

pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")

from clocks import SteppedClock
from ros2_fakes import FakeTransport

import sim
from controllers.rotations import mat_to_quat
from hardware.ros2 import messages as m
from hardware.ros2.config import SimRobotConfig
from hardware.ros2.observation import StateCache
from hardware.ros2.topics import EPISODE_FIELDS, SIM, task_state_sizes
from robotrl.nodes.sim_robot_node import SimRobotNode

pytestmark = pytest.mark.ros2  # needs cyclonedds (the message structs)


def _start(node: SimRobotNode) -> threading.Thread:
    thread = threading.Thread(target=node.run, daemon=True)
    thread.start()
    return thread


def _wait(pred, timeout: float = 60.0) -> None:
    if not eventually(pred, timeout):
        raise AssertionError("condition not reached")


def _episodes(bus: FakeTransport) -> list[dict[str, float]]:
    return [dict(zip(EPISODE_FIELDS, e.data, strict=True)) for e in bus.sent[SIM.episode]]


def test_lockstep_equals_the_in_process_env() -> None:
    bus = FakeTransport()
    node = SimRobotNode(SimRobotConfig(profile="sim", task="lift", lockstep=True), bus)
    cache = StateCache(SIM, task_state=True)
    cache.subscribe(bus)
    thread = _start(node)
    try:
        ref = sim.make("lift")
        rng = np.random.default_rng(0)
        reset = bus.publisher(SIM.reset, m.Float64MultiArray)
        act = bus.publisher(SIM.action, m.Float64MultiArray)
        reset.publish(m.Float64MultiArray(data=[5.0]))
        obs, _ = ref.reset(seed=5)
        _wait(lambda: len(bus.sent[SIM.episode]) == 1)
        for k in range(10):
            got = cache.at(round((k + 1) * 1e9 / 20))
            assert got is not None
            for key, value in obs.items():
                np.testing.assert_array_equal(got[key], value, err_msg=key)
            a = rng.uniform(-1, 1, 7)
            act.publish(m.Float64MultiArray(data=[float(x) for x in a]))
            obs, reward, *_ = ref.step(a)
            _wait(lambda k=k: len(bus.sent[SIM.episode]) == k + 2)
            ep = _episodes(bus)[-1]
            assert (ep["seed"], ep["step"], ep["reward"]) == (5.0, k + 1, reward)
        names = bus.sent[SIM.task_state][-1].name
        assert set(task_state_sizes(list(names))) == set(ref.task.observation_sizes())
    finally:
        node.close()
        thread.join(timeout=5)


def test_lockstep_cameras_and_instruction_equal_the_in_process_env() -> None:
    cams = ("table", "wrist")
    bus = FakeTransport()
    cfg = SimRobotConfig(
        profile="sim", task="tabletop", lockstep=True, cameras=cams, image_size=(32, 40)
    )
    node = SimRobotNode(cfg, bus)
    cache = StateCache(SIM, task_state=True, cameras=cams)
    cache.subscribe(bus)
    thread = _start(node)
    try:
        ref = sim.make("tabletop", cameras=cams, image_size=(32, 40))
        reset = bus.publisher(SIM.reset, m.Float64MultiArray)
        act = bus.publisher(SIM.action, m.Float64MultiArray)
        for seed in (3, 4):
            reset.publish(m.Float64MultiArray(data=[float(seed)]))
            obs, _ = ref.reset(seed=seed)
            _wait(lambda s=seed: any(int(e["seed"]) == s for e in _episodes(bus)[-1:]))
            # the instruction went out before the reset's state, latched
            assert bus.sent[SIM.instruction][-1].data == obs["language"]
            for _ in range(3):
                ep = _episodes(bus)[-1]
                stamp = int(ep["stamp_sec"]) * 1_000_000_000 + int(ep["stamp_nanosec"])
                got = cache.at(stamp)
                assert got is not None
                for cam in cams:
                    assert got[f"images/{cam}"].shape == (32, 40, 3)
                    np.testing.assert_array_equal(got[f"images/{cam}"], obs[f"images/{cam}"])
                n = len(bus.sent[SIM.episode])
                a = np.array([0.5, -0.3, -0.4, 0.0, 0.0, 0.0, 1.0])
                act.publish(m.Float64MultiArray(data=[float(x) for x in a]))
                obs, *_ = ref.step(a)
                _wait(lambda n=n: len(bus.sent[SIM.episode]) == n + 1)
        assert node.stats.image_msgs == 2 * len(bus.sent[SIM.episode])
    finally:
        node.close()
        thread.join(timeout=5)
    with pytest.raises(ValueError, match="no topic in profile"):
        SimRobotNode(SimRobotConfig(profile="franka", task="lift", cameras=("table",)), bus)


def test_realtime_rates_commands_and_reset() -> None:
    # real-time mode on a clock the test advances: rates and tracking without the wall clock
    bus = FakeTransport()
    clock = SteppedClock()
    cfg = SimRobotConfig(profile="sim", task="reach", state_hz=200.0, control_hz=20.0, seed=3)
    node = SimRobotNode(cfg, bus, clock_ns=clock.ns, wait=clock.wait)
    cache = StateCache(SIM, clock_ns=clock.ns)
    cache.subscribe(bus)
    thread = _start(node)
    try:
        clock.run_until(1.0)
        assert 200 <= len(bus.sent[SIM.joint_states]) <= 202  # 200 Hz for 1 s (+ the reset)
        assert 20 <= len(bus.sent[SIM.episode]) <= 22  # 20 Hz
        ep = _episodes(bus)[-1]
        assert ep["seed"] == 3 and ep["step"] in (19, 20)  # control periods since the reset
        assert 499 <= node.stats.physics_ticks <= 500 and node.stats.late_ticks == 0  # 500 Hz

        # equilibrium pose 5 cm away: the impedance controller brings the TCP there
        obs, _ = cache.latest()
        target = obs["state/ee_pos"].astype(float) + np.array([0.05, 0.0, -0.03])
        q = obs["state/ee_quat"].astype(float)
        pose = bus.publisher(SIM.equilibrium_pose, m.PoseStamped)
        pose.publish(
            m.PoseStamped(pose=m.Pose(m.Point(*target), m.Quaternion(q[1], q[2], q[3], q[0])))
        )
        bus.publisher(SIM.gripper_command, m.Float64MultiArray).publish(
            m.Float64MultiArray(data=[0.03])
        )
        bus.publisher(SIM.impedance_params, m.Float64MultiArray).publish(
            m.Float64MultiArray(data=[1500.0] * 3 + [100.0] * 3)
        )
        clock.run_until(3.0)
        obs, _age = cache.latest()
        assert np.linalg.norm(obs["state/ee_pos"] - target) < 0.005
        assert obs["state/gripper"][0] == pytest.approx(0.03, abs=0.003)
        np.testing.assert_allclose(node.env.controller.stiffness, [1500.0] * 3 + [100.0] * 3)
        assert node.stats.commands == 1

        # reset: the arm is where the in-process env puts it for that seed
        ref = sim.make("reach")
        ref_obs, _ = ref.reset(seed=11)
        bus.publisher(SIM.reset, m.Float64MultiArray).publish(m.Float64MultiArray(data=[11.0]))
        clock.run_until(3.01)
        first = next(e for e in _episodes(bus) if e["seed"] == 11)
        assert first["step"] == 0
        stamp = int(first["stamp_sec"]) * 1_000_000_000 + int(first["stamp_nanosec"])
        joints = [j for j in bus.sent[SIM.joint_states] if m.time_ns(j.header.stamp) == stamp]
        assert joints, "the reset state is published with the episode message's stamp"
        np.testing.assert_allclose(joints[0].position[:7], ref_obs["state/joint_pos"], atol=1e-6)
        # after a reset the arm holds the reset pose (old targets are dropped)
        clock.run_until(3.5)
        obs, _ = cache.latest()
        assert np.linalg.norm(obs["state/ee_pos"] - ref_obs["state/ee_pos"]) < 0.005
    finally:
        clock.close()
        node.close()
        thread.join(timeout=5)
    assert node.stats.resets == 2 and node.stats.physics_ticks >= 1745  # 3.5 s at 500 Hz


def _spy(env) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Record every target the env's controller is given and every torque the filter passes."""
    targets: list[np.ndarray] = []
    torques: list[np.ndarray] = []
    track, filter_torque = env.track, env.safety.filter_torque

    def spy_track(pos, rot):
        targets.append(np.concatenate([pos, np.ravel(rot)]))
        track(pos, rot)

    def spy_torque(tau, q, dq):
        out = filter_torque(tau, q, dq)
        torques.append(out.copy())
        return out

    env.track, env.safety.filter_torque = spy_track, spy_torque
    return targets, torques


def test_bridge_command_path_gives_the_envs_targets_and_torques() -> None:
    """The same actions through PandaEnv.step and through PoseCommander -> equilibrium_pose ->
    the lockstep sim robot: the same targets and per-tick torques (the commander reads the
    node's measured pose here; on the wire it is float32, test_robot_env covers that path)."""
    from hardware.ros2.pose_commander import PoseCommander

    bus = FakeTransport()
    cfg = SimRobotConfig(
        profile="sim", task="lift", controller="impedance", lockstep=True,
        lockstep_on="equilibrium_pose",
    )  # fmt: skip
    node = SimRobotNode(cfg, bus)
    done = threading.Semaphore(0)
    bus.subscribe(SIM.episode, m.Float64MultiArray, lambda _msg: done.release())
    node_targets, node_torques = _spy(node.env)
    ref = sim.make("lift", controller="impedance")
    ref_targets, ref_torques = _spy(ref)
    commander = PoseCommander(bus, SIM)
    thread = _start(node)
    try:
        bus.publisher(SIM.reset, m.Float64MultiArray).publish(m.Float64MultiArray(data=[4.0]))
        ref.reset(seed=4)
        assert done.acquire(timeout=10)
        actions = np.random.default_rng(2).uniform(-1, 1, (25, 7))
        actions[[7, 8]] = np.nan  # held by both
        for a in actions:
            s = node.env.state
            commander.apply(a, s.ee_pos, mat_to_quat(s.ee_rot))
            ref.step(a)
            assert done.acquire(timeout=10)
            np.testing.assert_array_equal(node.env.gripper_command(), ref.gripper_command())
        assert len(node_targets) == len(ref_targets) == len(actions)
        np.testing.assert_allclose(node_targets, ref_targets, rtol=0, atol=1e-9)
        assert len(node_torques) == len(ref_torques) == len(actions) * ref.n_substeps
        np.testing.assert_allclose(node_torques, ref_torques, rtol=0, atol=1e-9)
    finally:
        node.close()
        thread.join(timeout=5)
