"""PoseCommander (actions -> safety-filtered equilibrium pose, the sim env's semantics) and the
stale-state watchdog (hold with the reason, resume, status topic)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")

from ros2_fakes import FakeTransport

from controllers.rotations import mat_to_quat, quat_to_mat, rotvec_to_mat
from hardware.ros2 import messages as m
from hardware.ros2.observation import StateCache, state_messages
from hardware.ros2.pose_commander import STATUS_TOPIC, PoseCommander, StateWatchdog
from hardware.ros2.topics import SIM

pytestmark = pytest.mark.ros2  # needs cyclonedds (the message structs)

DOWN_QUAT = mat_to_quat(np.diag([1.0, -1.0, -1.0]))  # (w, x, y, z), TCP pointing down


def _pose_of(msg: m.PoseStamped) -> tuple[np.ndarray, np.ndarray]:
    p, q = msg.pose.position, msg.pose.orientation
    return np.array([p.x, p.y, p.z]), quat_to_mat(np.array([q.w, q.x, q.y, q.z]))


def test_action_becomes_the_sim_envs_target_and_gripper_width() -> None:
    bus = FakeTransport()
    cmd = PoseCommander(bus, SIM, max_dpos=0.02, max_drot=0.1)
    ee = np.array([0.5, 0.0, 0.3])
    a = np.array([0.5, -1.0, 0.25, 0.0, 0.0, 0.3, 1.0])
    flags = cmd.apply(a, ee, DOWN_QUAT)
    pos, rot = _pose_of(bus.sent[SIM.equilibrium_pose][-1])
    np.testing.assert_allclose(pos, ee + a[:3] * 0.02, atol=1e-12)
    want = rotvec_to_mat(a[3:6] * 0.1) @ quat_to_mat(DOWN_QUAT)
    np.testing.assert_allclose(rot, want, atol=1e-9)
    assert not any(flags.values())
    assert bus.sent[SIM.gripper_command][-1].data == [0.0]  # +1 closes: width 0
    cmd.apply(np.array([0, 0, 0, 0, 0, 0, -1.0]), ee, DOWN_QUAT)
    assert bus.sent[SIM.gripper_command][-1].data == [pytest.approx(0.08)]  # fully open
    assert bus.sent[SIM.equilibrium_pose][-1].header.frame_id == SIM.base_frame


def test_grasp_hold_keeps_a_held_object_gripped_on_the_robot() -> None:
    """grasp_release_z > 0: the commander's grasp hold stage (the sim reflex's) raises a
    loosening command while the fingers hold something above the release height."""
    bus = FakeTransport()
    cmd = PoseCommander(bus, SIM, grasp_release_z=0.08)
    ee, loosen = np.array([0.5, 0.0, 0.3]), np.array([0, 0, 0.3, 0, 0, 0, 0.2])
    cmd.apply(np.array([0, 0, 0, 0, 0, 0, 1.0]), ee, DOWN_QUAT, opening=0.024)  # grasp
    flags = cmd.apply(loosen, ee, DOWN_QUAT, opening=0.024)
    assert flags["grasp_hold"] and bus.sent[SIM.gripper_command][-1].data == [0.0]
    flags = cmd.apply(loosen, np.array([0.5, 0.0, 0.05]), DOWN_QUAT, opening=0.024)
    assert not flags["grasp_hold"]  # low enough to put it down
    assert bus.sent[SIM.gripper_command][-1].data == [pytest.approx(0.8 * 0.04)]  # 0.2 passes
    with pytest.raises(ValueError, match="finger opening"):
        cmd.apply(loosen, ee, DOWN_QUAT)
    assert "grasp_hold" not in PoseCommander(FakeTransport(), SIM).apply(loosen, ee, DOWN_QUAT)


def test_safety_filter_is_last_workspace_step_and_nan() -> None:
    bus = FakeTransport()
    cmd = PoseCommander(bus, SIM, max_dpos=0.02, workspace_high=(0.8, 0.45, 0.31))
    ee = np.array([0.5, 0.0, 0.3])
    flags = cmd.apply(np.array([0, 0, 1.0, 0, 0, 0, 0]), ee, DOWN_QUAT)
    pos, _ = _pose_of(bus.sent[SIM.equilibrium_pose][-1])
    assert pos[2] == pytest.approx(0.31) and flags["workspace_clamped"]
    # a measured pose that jumped far (e.g. a stale reading): the step limit caps the target
    flags = cmd.apply(np.zeros(7), np.array([0.6, 0.0, 0.3]), DOWN_QUAT)
    pos2, _ = _pose_of(bus.sent[SIM.equilibrium_pose][-1])
    assert flags["step_limited"]
    assert np.linalg.norm(pos2 - pos) == pytest.approx(2.5 * 0.02)
    n_grip = len(bus.sent[SIM.gripper_command])
    flags = cmd.apply(np.full(7, np.nan), ee, DOWN_QUAT)
    pos3, _ = _pose_of(bus.sent[SIM.equilibrium_pose][-1])
    assert flags["nan"] and np.array_equal(pos3, pos2)  # holds the last safe target
    assert len(bus.sent[SIM.gripper_command]) == n_grip  # no gripper command from NaN
    with pytest.raises(ValueError, match=r"shape \(7,\)"):
        cmd.apply(np.zeros(6), ee, DOWN_QUAT)


def test_resync_starts_from_the_measured_pose_and_hold_resends() -> None:
    bus = FakeTransport()
    cmd = PoseCommander(bus, SIM)
    cmd.apply(np.zeros(7), np.array([0.5, 0.0, 0.3]), DOWN_QUAT)
    cmd.resync()  # e.g. after a reset: the arm is elsewhere now
    far = np.array([0.4, 0.2, 0.2])
    flags = cmd.apply(np.zeros(7), far, DOWN_QUAT)
    pos, _ = _pose_of(bus.sent[SIM.equilibrium_pose][-1])
    assert not flags["step_limited"] and np.allclose(pos, far)
    n = len(bus.sent[SIM.equilibrium_pose])
    cmd.hold()
    assert len(bus.sent[SIM.equilibrium_pose]) == n + 1
    assert _pose_of(bus.sent[SIM.equilibrium_pose][-1])[0] == pytest.approx(far)


def test_stiffness_is_published_latched_and_validated() -> None:
    bus = FakeTransport()
    PoseCommander(bus, SIM, stiffness=(1000, 1000, 1000, 50, 50, 50))
    assert bus.sent[SIM.impedance_params][-1].data == [1000, 1000, 1000, 50, 50, 50]
    with pytest.raises(ValueError, match="6 positive"):
        PoseCommander(bus, SIM, stiffness=(1.0, 2.0))


class _Clock:
    def __init__(self) -> None:
        self.t = 0

    def __call__(self) -> int:
        return self.t


def test_watchdog_holds_with_the_stale_topic_and_resumes() -> None:
    import sim

    clock = _Clock()
    cache = StateCache(SIM, clock_ns=clock)
    bus = FakeTransport()
    holds, resumes = [], []
    dog = StateWatchdog(
        cache,
        0.05,
        on_hold=holds.append,
        on_resume=lambda: resumes.append(1),
        status=bus,
        clock=lambda: clock.t / 1e9,
        run=False,  # the test ticks it, at the fake clock
    )
    env = sim.make("reach")
    obs, _ = env.reset(seed=0)

    def publish_all(t_ns: int) -> None:
        for topic, msg in state_messages(obs, t_ns, SIM).items():
            cache.put(topic, msg)

    assert dog.held and "no state received yet" in dog.check()
    publish_all(1)
    dog.tick()
    assert not dog.held and resumes == [1] and dog.check() == ""
    clock.t += 40_000_000  # 40 ms: within the bound
    dog.tick()
    assert not dog.held and holds == []
    # only the wrench topic keeps publishing; the others go stale
    clock.t += 30_000_000
    cache.put(SIM.wrench, state_messages(obs, 2, SIM)[SIM.wrench])
    dog.tick()
    assert dog.held and len(holds) == 1
    assert "70 ms old > 50 ms bound" in holds[0]
    assert holds[0].split()[0] in (SIM.joint_states, SIM.ee_pose, SIM.gripper_joint_states)
    assert bus.sent[STATUS_TOPIC][-1].data == f"hold: {holds[0]}"
    event = dog.state.events[-1]
    assert event.reason == holds[0] and event.end is None and event.start == clock.t / 1e9
    dog.tick()
    assert len(holds) == 1  # one hold, not one per check
    publish_all(3)
    clock.t += 1_000_000
    dog.tick()
    assert not dog.held and resumes == [1, 1] and bus.sent[STATUS_TOPIC][-1].data == "ok"
    assert dog.state.events[-1].end == clock.t / 1e9
    dog.close()
