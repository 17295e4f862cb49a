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


# ------------------------------------------------------------------ the reflex on the robot
def _critic(tmp_path, names=("ee_pos", "ee_vel", "force", "gripper")) -> str:
    from reflex_weights import pushing_down_low_critic

    w = pushing_down_low_critic()
    w["feature_names"] = np.array(list(names))
    path = tmp_path / "risk.npz"
    np.savez(path, **w)
    return str(path)


def _features(z: float, force: float = 0.0) -> np.ndarray:
    from hardware.ros2.pose_commander import ReflexFeatures

    obs = {
        "state/ee_pos": np.array([0.5, 0.0, z]),
        "state/ee_twist": np.zeros(6),
        "state/wrench": np.array([0.0, 0.0, force, 0.0, 0.0, 0.0]),
        "state/gripper": np.array([0.04]),
    }
    return ReflexFeatures()(obs, 0).copy()


def test_the_reflex_replaces_a_risky_command_before_it_is_sent(tmp_path) -> None:
    bus = FakeTransport()
    k = (600.0, 600.0, 600.0, 30.0, 30.0, 30.0)
    cmd = PoseCommander(bus, SIM, safety_critic=_critic(tmp_path), stiffness=k)
    down = np.array([0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0])
    high, low = np.array([0.5, 0.0, 0.16]), np.array([0.5, 0.0, 0.13])
    flags = cmd.apply(down, high, DOWN_QUAT, features=_features(0.16))
    assert not flags["reflex"]
    np.testing.assert_allclose(_pose_of(bus.sent[SIM.equilibrium_pose][-1])[0], high - [0, 0, 0.02])
    flags = cmd.apply(down, low, DOWN_QUAT, features=_features(0.13, force=8.0))
    assert flags["reflex"] and flags["risk"] > 0.3 and flags["stiffness_lowered"]
    np.testing.assert_allclose(_pose_of(bus.sent[SIM.equilibrium_pose][-1])[0], low)  # held
    assert bus.sent[SIM.impedance_params][-1].data == pytest.approx([0.25 * x for x in k])
    # the next command starts out of contact and passes: the nominal stiffness returns
    up = np.array([0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0])
    flags = cmd.apply(up, low, DOWN_QUAT, features=_features(0.13))
    assert not flags["reflex"] and bus.sent[SIM.impedance_params][-1].data == list(k)
    with pytest.raises(ValueError, match="features"):
        cmd.apply(up, low, DOWN_QUAT)


def test_the_reflex_rechecks_the_last_command_between_commands(tmp_path) -> None:
    bus = FakeTransport()
    cmd = PoseCommander(bus, SIM, safety_critic=_critic(tmp_path))
    down = np.array([0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0])
    assert cmd.reflex_tick(_features(0.10), np.array([0.5, 0, 0.1]), DOWN_QUAT) == {}  # none yet
    cmd.apply(down, np.array([0.5, 0.0, 0.16]), DOWN_QUAT, features=_features(0.16))
    sent = len(bus.sent[SIM.equilibrium_pose])
    flags = cmd.reflex_tick(_features(0.16), np.array([0.5, 0, 0.16]), DOWN_QUAT)
    assert not flags["reflex"] and len(bus.sent[SIM.equilibrium_pose]) == sent  # still safe
    low = np.array([0.5, 0.0, 0.12])  # the arm went on down: the same command is now risky
    flags = cmd.reflex_tick(_features(0.12), low, DOWN_QUAT)
    assert flags["reflex"] and flags["reflex_ticks"] == 1
    np.testing.assert_allclose(_pose_of(bus.sent[SIM.equilibrium_pose][-1])[0], low)
    assert cmd.reflex_tick(_features(0.12), low, DOWN_QUAT)["reflex_ticks"] == 1  # no re-send


def test_a_critic_reading_task_state_is_refused_on_the_robot(tmp_path) -> None:
    path = _critic(tmp_path, ("ee_pos", "ee_vel", "force", "gripper", "task/hole_pos"))
    with pytest.raises(ValueError, match="task_keys"):
        PoseCommander(FakeTransport(), SIM, safety_critic=path)


def test_robot_features_equal_the_sim_guards_and_velocity_falls_back_to_differences() -> None:
    import sim
    from hardware.ros2.pose_commander import ReflexFeatures

    env = sim.make("reach", safety="monitor")
    env.reset(seed=0)
    read = ReflexFeatures()
    rng = np.random.default_rng(0)
    for _ in range(5):
        obs = env.step(rng.uniform(-1, 1, 7).astype(np.float32))[0]
        # what the robot publishes (float32 state) gives what the sim reflex reads
        np.testing.assert_allclose(read(obs, 0), env.guard.features(), atol=1e-5)
    env.close()
    fd = ReflexFeatures()  # a profile without a twist topic: finite differences of the pose
    base = {"state/wrench": np.zeros(6), "state/gripper": np.array([0.0])}
    fd({**base, "state/ee_pos": np.array([0.5, 0.0, 0.3])}, 1_000_000_000)
    f = fd({**base, "state/ee_pos": np.array([0.5, 0.01, 0.3])}, 1_050_000_000)
    np.testing.assert_allclose(f[3:6], [0.0, 0.2, 0.0], atol=1e-9)
    with pytest.raises(KeyError, match="state/wrench"):
        fd({"state/ee_pos": np.zeros(3), "state/gripper": np.zeros(1)}, 0)
