"""Recorder node: a teleop session over ROS 2 topics lands in the zarr store identical to the
same session recorded in-process by ``robotrl collect`` (CollectionSession), through the
in-memory transport and over Cyclone DDS on loopback; untagged actions pair by zero-order hold
on the grid; incomplete episodes are discarded, never half-written.

"Identical": the same episode ends, every per-step array (all observations, action,
intervention, reward), final observations and outcome metadata equal bit for bit (tolerance 0).
Only wall-clock fields differ and are left out: ``timestamp`` (a clock reading in-process, the
sim stamp ``k / fps`` over ROS) and ``duration_s`` / ``start_time``. No tolerance is needed
because every value crosses the wire as the float64 the env computed (float32 observations
widen exactly) and the lockstep sim steps with exactly the actions the expert produced.
"""

from __future__ import annotations

import json
import os
import random
import threading

import numpy as np
import pytest
from ros2_fakes import FakeTransport, LockstepSim
from waits import eventually

import sim
from hardware.devices import ExpertDevice
from hardware.ros2 import messages as m
from hardware.ros2.config import RecorderConfig, TeleopNodeConfig
from robotrl.collection import ACTION_SPACE, ROBOT_NAME, CollectionSession, open_or_create_store
from robotrl.datasets import EpisodeStore, verify
from robotrl.datasets.store_diff import diff_stores
from robotrl.nodes.recorder_node import RecorderNode
from robotrl.nodes.teleop_node import TeleopNode

TASK, SEED, NOISE, EPISODES = "lift", 7, 0.3, 2


def _in_process(path: str, episodes: int = EPISODES) -> EpisodeStore:
    """What ``robotrl collect task=lift device=expert expert_noise=0.3 seed=7`` records."""
    env = sim.make(TASK)
    expert = sim.make_expert(TASK, env, noise=NOISE, seed=SEED)
    store = open_or_create_store(
        path,
        fps=env.control_hz,
        robot=ROBOT_NAME,
        obs_keys=list(env.observation_space.spaces),
        action_space=ACTION_SPACE,
    )
    session = CollectionSession(
        env,
        ExpertDevice(expert),
        store,
        operator="op",
        task=TASK,
        realtime=False,
        seed=SEED,
        status=None,
    )
    assert session.run(episodes).recorded == episodes
    store.close()
    return EpisodeStore.open(path)


def _over_topics(transports: list, path: str, episodes: int = EPISODES) -> RecorderNode:
    """Sim robot (lockstep), recorder and expert teleop node, each on its own transport."""
    sim_node = LockstepSim(transports[0], TASK)
    rec = RecorderNode(
        RecorderConfig(
            profile="sim", out=path, task=TASK, operator="op", task_state=True, episodes=episodes
        ),
        transports[1],
    )
    teleop = TeleopNode(
        TeleopNodeConfig(
            profile="sim",
            device="expert",
            task=TASK,
            lockstep=True,
            episodes=episodes,
            seed=SEED,
            expert_noise=NOISE,
            wait_subscribers=2,
        ),
        transports[2],
    )
    thread = threading.Thread(target=rec.run, kwargs={"timeout_s": 20.0})
    thread.start()
    try:
        stats = teleop.run()
    finally:
        thread.join(timeout=60)
        rec.close()
        sim_node.close()
    assert stats.episodes == episodes
    return rec


def _check_identical(tmp_path, rec: RecorderNode, episodes: int = EPISODES) -> None:
    assert rec.stats.recorded == episodes and rec.stats.discarded == 0, rec.stats
    ref = _in_process(str(tmp_path / "in_process.zarr"), episodes)
    got = EpisodeStore.open(tmp_path / "ros.zarr")
    assert diff_stores(ref, got) == []
    assert ref.num_steps > 60 * episodes // 2  # real episodes, not a trivial pass
    assert set(ref.keys) >= {"state/joint_pos", "state/cube_pos", "state/gripper", "action"}
    # the recorder's timestamps are the sim's grid: exactly k / fps within each episode
    for i in range(episodes):
        ts = got.get("timestamp", got.episode_slice(i))
        np.testing.assert_allclose(ts, np.arange(len(ts)) / 20.0, rtol=0, atol=1e-12)
    assert verify(tmp_path / "ros.zarr")["ok"]


def test_session_over_in_memory_topics_is_identical_to_in_process(tmp_path):
    bus = FakeTransport()
    rec = _over_topics([bus, bus, bus], str(tmp_path / "ros.zarr"))
    _check_identical(tmp_path, rec)
    # what went over the wire: one tagged action, twist and flag per recorded step
    steps = EpisodeStore.open(tmp_path / "ros.zarr").num_steps
    assert len(bus.sent["/robotrl/action"]) == steps
    assert len(bus.sent["/robotrl/intervention"]) == steps
    assert all(msg.data for msg in bus.sent["/robotrl/intervention"])


@pytest.mark.ros2
def test_session_over_dds_is_identical_to_in_process(tmp_path):
    pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")
    from hardware.ros2.transport import CycloneTransport, loopback_config

    os.environ.setdefault("CYCLONEDDS_URI", loopback_config())
    domain = random.randint(1, 230)
    transports = [CycloneTransport(domain, n) for n in ("sim_robot", "recorder", "teleop")]
    try:
        rec = _over_topics(transports, str(tmp_path / "ros.zarr"))
    finally:
        for t in transports:
            t.close()
    _check_identical(tmp_path, rec)


# ------------------------------------------------------------------ grid and failure cases
def _episode(seed: int, step: int, stamp_ns: int, *, reward=0.0, success=0, term=0, trunc=0):
    sec, nsec = divmod(stamp_ns, 1_000_000_000)
    data = [seed, step, reward, success, term, trunc, sec, nsec]
    return m.Float64MultiArray(data=[float(x) for x in data])


class _Robot:
    """Publishes state and episode messages of a scripted trajectory on a FakeTransport."""

    def __init__(self, bus: FakeTransport, rec: RecorderNode) -> None:
        from hardware.ros2.observation import state_messages
        from hardware.ros2.topics import SIM

        self.bus, self.rec, self.state_messages, self.profile = bus, rec, state_messages, SIM
        self.pubs: dict = {}
        self.env = sim.make("reach")
        self.obs, _ = self.env.reset(seed=0)

    def publish(self, msg_topic: str, msg) -> None:
        if msg_topic not in self.pubs:
            self.pubs[msg_topic] = self.bus.publisher(msg_topic, type(msg))
        self.pubs[msg_topic].publish(msg)

    def step(self, seed, step, t_ns, *, with_state=True, **flags):
        if with_state:
            for topic, msg in self.state_messages(self.obs, t_ns, self.profile).items():
                self.publish(topic, msg)
        self.publish("/robotrl/episode", _episode(seed, step, t_ns, **flags))
        ep, received = self.rec._episodes.get_nowait()
        self.rec.handle(ep, received)


def _recorder(tmp_path, **kw) -> tuple[FakeTransport, RecorderNode]:
    bus = FakeTransport()
    cfg = RecorderConfig(profile="sim", out=str(tmp_path / "r.zarr"), state_timeout_s=0.05, **kw)
    return bus, RecorderNode(cfg, bus)


def test_untagged_actions_pair_by_zero_order_hold(tmp_path):
    bus, rec = _recorder(tmp_path)
    robot = _Robot(bus, rec)
    act = bus.publisher("/robotrl/action", m.Float64MultiArray)
    flag = bus.publisher("/robotrl/intervention", m.Bool)
    robot.step(3, 0, 1_000)
    for k, value in enumerate([0.1, 0.2, 0.3]):  # several actions per step: the newest counts
        act.publish(m.Float64MultiArray(data=[value - 0.05] + [0.0] * 6))
        act.publish(m.Float64MultiArray(data=[value] + [0.0] * 6))
        flag.publish(m.Bool(data=k == 1))
        robot.step(3, k + 1, 1_000 + (k + 1) * 50_000_000, reward=k, trunc=int(k == 2))
    rec.close()
    store = EpisodeStore.open(tmp_path / "r.zarr")
    assert store.num_episodes == 1
    np.testing.assert_array_equal(store.get("action")[:, 0], np.float32([0.1, 0.2, 0.3]))
    np.testing.assert_array_equal(store.get("intervention"), [False, True, False])
    np.testing.assert_array_equal(store.get("reward"), np.float32([0, 1, 2]))
    assert not store.meta("terminated")[0] and store.meta("intervention_steps")[0] == 1


def test_incomplete_episodes_are_discarded_with_the_reason(tmp_path):
    bus, rec = _recorder(tmp_path)
    robot = _Robot(bus, rec)
    act = bus.publisher("/robotrl/action", m.Float64MultiArray)
    robot.step(0, 0, 10)
    act.publish(m.Float64MultiArray(data=[0.0] * 7))
    robot.step(0, 1, 20)
    robot.step(1, 0, 30)  # reset before the episode ended
    # the state of this step never arrives, and the last one is older than state_timeout_s
    robot.step(1, 1, 100_000_030, with_state=False)
    robot.step(2, 0, 200_000_000)
    robot.step(2, 1, 200_000_010, term=1)  # ends, but no action was sent after its reset
    assert rec.stats.recorded == 0
    assert rec.stats.discarded == 3
    assert "reset (seed 1) before episode end" in rec.stats.reasons[0]
    assert "state of step 1 of seed 1 incomplete" in rec.stats.reasons[1]
    assert rec.stats.reasons[2] == "no action for step 0 of seed 2"
    rec.close()
    assert not (tmp_path / "r.zarr").exists()  # nothing half-written, not even an empty store


@pytest.mark.ros2
@pytest.mark.slow
def test_console_script_processes_over_dds_record_the_in_process_session(tmp_path):
    """robotrl-sim-robot (lockstep), robotrl-teleop-node and robotrl-recorder-node as three
    processes on loopback DDS."""
    import subprocess
    import sys

    pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")
    from hardware.ros2.transport import loopback_config

    env = {**os.environ, "ROS_DOMAIN_ID": str(random.randint(1, 230))}
    env.setdefault("CYCLONEDDS_URI", loopback_config())
    bindir = os.path.dirname(sys.executable)
    p = "-p"
    base = ["--ros-args", p, "profile:=sim", p, f"task:={TASK}"]
    sim_robot = subprocess.Popen(
        [f"{bindir}/robotrl-sim-robot", *base, p, "lockstep:=true"],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    recorder = subprocess.Popen(
        [
            f"{bindir}/robotrl-recorder-node",
            *base,
            p,
            f"out:={tmp_path / 'ros.zarr'}",
            p,
            "operator:=op",
            p,
            "task_state:=true",
            p,
            f"episodes:={EPISODES}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        teleop = subprocess.run(
            [
                f"{bindir}/robotrl-teleop-node",
                *base,
                p,
                "device:=expert",
                p,
                "lockstep:=true",
                p,
                f"episodes:={EPISODES}",
                p,
                f"seed:={SEED}",
                p,
                f"expert_noise:={NOISE}",
                p,
                "wait_subscribers:=2",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert teleop.returncode == 0, teleop.stderr[-2000:]
        out, _ = recorder.communicate(timeout=60)
    finally:
        for proc in (sim_robot, recorder):
            proc.terminate()
            proc.wait(timeout=30)
    stats = json.loads(out.strip().splitlines()[-1])
    assert (stats["recorded"], stats["discarded"]) == (EPISODES, 0)
    ref = _in_process(str(tmp_path / "in_process.zarr"))
    assert diff_stores(ref, EpisodeStore.open(tmp_path / "ros.zarr")) == []


@pytest.mark.ros2
@pytest.mark.slow
def test_real_time_robot_path_records_by_zero_order_hold(tmp_path):
    """The data-collection launch on the sim robot in real time: expert teleop (timer) ->
    bridge (safety filter) -> sim robot (physics in wall-clock time) -> recorder. Not lockstep,
    so not comparable bit for bit: the recorder holds each topic's newest state at the step
    stamps and pairs every step with an action the teleop really sent."""
    pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")

    from hardware.ros2.bridge import BridgeNode
    from hardware.ros2.config import BridgeConfig, SimRobotConfig
    from hardware.ros2.transport import CycloneTransport, loopback_config
    from robotrl.nodes.sim_robot_node import SimRobotNode

    os.environ.setdefault("CYCLONEDDS_URI", loopback_config())
    domain = random.randint(1, 230)
    tr = {n: CycloneTransport(domain, n) for n in ("rec", "bridge", "sim", "teleop", "op")}
    sent: list[np.ndarray] = []
    tr["op"].subscribe(
        "/robotrl/action", m.Float64MultiArray, lambda msg: sent.append(np.float32(msg.data))
    )
    rec = RecorderNode(
        RecorderConfig(
            profile="sim", out=str(tmp_path / "rt.zarr"), task="reach", task_state=True, episodes=1
        ),
        tr["rec"],
    )
    bridge = BridgeNode(BridgeConfig(profile="sim", state_timeout_s=0.2), tr["bridge"])
    sim_robot = SimRobotNode(SimRobotConfig(task="reach", state_hz=100.0, seed=3), tr["sim"])
    teleop = TeleopNode(
        TeleopNodeConfig(profile="sim", device="expert", task="reach", state_timeout_s=0.2),
        tr["teleop"],
    )
    reset = tr["op"].publisher("/robotrl/reset", m.Float64MultiArray)
    threads = [
        threading.Thread(target=rec.run, kwargs={"timeout_s": 15.0}),
        threading.Thread(target=bridge.run, kwargs={"duration_s": 14.0}),
        threading.Thread(target=sim_robot.run, kwargs={"duration_s": 14.0}),
        threading.Thread(target=teleop.run, kwargs={"duration_s": 8.0}),
    ]
    try:
        for t in threads:
            t.start()
        # the operator resets once the teleop is driving the robot
        assert eventually(lambda: bridge.stats.applied > 10)
        reset.publish(m.Float64MultiArray(data=[5.0]))
        threads[0].join(timeout=30)
    finally:
        for node in (teleop, sim_robot, bridge, rec):
            node.stop()
        for t in threads:
            t.join(timeout=30)
        rec.close()
        for t in tr.values():
            t.close()
    assert rec.stats.recorded == 1, rec.stats
    store = EpisodeStore.open(tmp_path / "rt.zarr")
    assert store.meta("success")[0] and 5 <= store.num_steps <= 50
    actions = store.get("action")
    assert all(any(np.array_equal(a, s) for s in sent) for a in actions)  # really sent
    assert store.get("intervention").all()
    dt = np.diff(store.get("timestamp"))
    assert 0.04 < float(np.median(dt)) < 0.08  # the 20 Hz grid of the sim's control ticks


def test_operator_episodes_on_a_robot_without_episode_messages(tmp_path):
    """A real arm publishes only state: the teleop node's ticks are the grid (publish_episodes);
    success / failure end an episode, rerecord drops it; state is held at the tick stamps."""
    import time

    from hardware.devices import ScriptedDevice, TeleopCommand
    from hardware.ros2.observation import state_messages
    from hardware.ros2.topics import FRANKA

    bus = FakeTransport()
    env = sim.make("reach")
    obs, _ = env.reset(seed=0)
    stop = threading.Event()

    publishing = threading.Event()

    def robot() -> None:  # the arm's broadcasters at 200 Hz, stamped with the wall clock
        pubs: dict = {}
        while not stop.is_set():
            for topic, msg in state_messages(obs, time.time_ns(), FRANKA).items():
                pubs.setdefault(topic, bus.publisher(topic, type(msg))).publish(msg)
            publishing.set()
            stop.wait(0.005)

    def move(x: float) -> TeleopCommand:
        return TeleopCommand(np.array([x, 0, 0, 0, 0, 0, -1.0]), intervene=True)

    def event(name: str) -> TeleopCommand:
        return TeleopCommand.idle(-1.0, frozenset({name}))

    script = [move(0.1), move(0.2), event("rerecord"), move(0.3), move(0.4), move(0.5)]
    script += [event("success"), move(0.6), move(0.7), event("failure")]
    rec = RecorderNode(
        RecorderConfig(
            profile="franka", out=str(tmp_path / "r.zarr"), state_timeout_s=0.2, episodes=2
        ),
        bus,
    )
    teleop = TeleopNode(
        TeleopNodeConfig(
            profile="franka",
            device="scripted",
            rate_hz=50.0,
            publish_episodes=True,
            episodes=2,
            seed=10,
        ),
        bus,
        ScriptedDevice(script),
    )
    threads = [
        threading.Thread(target=robot),
        threading.Thread(target=rec.run, kwargs={"timeout_s": 3.0}),
    ]
    for t in threads:
        t.start()
    assert publishing.wait(30)
    try:
        stats = teleop.run(duration_s=5.0)
    finally:
        threads[1].join(timeout=10)
        stop.set()
        threads[0].join(timeout=10)
        rec.close()
    assert stats.episodes == 2
    assert [r.data[0] for r in bus.sent["/robotrl/reset"]] == [10.0, 10.0, 11.0]
    assert (rec.stats.recorded, rec.stats.discarded) == (2, 1), rec.stats
    assert "reset (seed 10) before episode end" in rec.stats.reasons[0]
    store = EpisodeStore.open(tmp_path / "r.zarr")
    np.testing.assert_array_equal(store.episode_ends, [3, 5])
    np.testing.assert_array_equal(store.get("action")[:, 0], np.float32([0.3, 0.4, 0.5, 0.6, 0.7]))
    np.testing.assert_array_equal(store.meta("success"), [True, False])
    assert not store.meta("terminated").any()
    np.testing.assert_array_equal(store.get("state/ee_pos")[0], obs["state/ee_pos"])
    dt = np.diff(store.get("timestamp", store.episode_slice(0)))
    # the twists' increasing stamps, one per tick; their spacing is the wall clock's (a late
    # tick on a loaded machine is followed by an early one), so only its order is asserted
    assert np.all(dt > 0) and np.all(dt < 1.0)
