"""Teleop node: device commands become twist [m/s, rad/s], normalised action and intervention
flag at the configured rate; the expert acts only on fresh state; lockstep runs episodes."""

from __future__ import annotations

import numpy as np
import pytest
from ros2_fakes import FakeTransport, LockstepSim

import sim
from hardware.devices import ScriptedDevice, TeleopCommand
from hardware.ros2.config import ConfigError, TeleopNodeConfig
from hardware.ros2.observation import state_messages
from hardware.ros2.topics import SIM, parse_action_tag
from robotrl.nodes.teleop_node import TeleopNode


def test_commands_become_twist_action_and_flag():
    bus = FakeTransport()
    cmds = [
        TeleopCommand(np.array([1.0, -0.5, 0.0, 0.0, 0.2, 0.0, 1.0]), intervene=True),
        TeleopCommand(np.zeros(7), intervene=False),
    ]
    cfg = TeleopNodeConfig(profile="franka", device="scripted", rate_hz=50.0)
    now, waits = [0], []  # a clock [ns] that moves only while the node waits

    def wait(seconds):
        waits.append(seconds)
        now[0] += round(seconds * 1e9)

    device = ScriptedDevice(cmds, quit_when_done=True)
    node = TeleopNode(cfg, bus, device, clock_ns=lambda: now[0], wait=wait)
    stats = node.run(duration_s=2.0)
    assert stats.stopped_by == "quit" and stats.ticks == 3 and stats.interventions == 1
    assert waits == pytest.approx([1 / 50, 1 / 50])  # 3 ticks at 50 Hz
    tw = bus.sent["/robotrl/teleop/twist"][0].twist
    # 1.0 action unit = max_dpos 0.02 m per 1/50 s = 1.0 m/s; 0.2 x 0.1 rad x 50 Hz = 1 rad/s
    assert (tw.linear.x, tw.linear.y, tw.angular.y) == pytest.approx((1.0, -0.5, 1.0))
    assert bus.sent["/robotrl/teleop/twist"][0].header.frame_id == "fr3_link0"
    assert [list(a.data) for a in bus.sent["/robotrl/action"][:2]] == [
        pytest.approx([1.0, -0.5, 0.0, 0.0, 0.2, 0.0, 1.0]),
        [0.0] * 7,
    ]
    assert [f.data for f in bus.sent["/robotrl/intervention"]] == [True, False, False]


def test_publish_action_false_leaves_the_robot_to_the_policy():
    bus = FakeTransport()
    cfg = TeleopNodeConfig(device="scripted", publish_action=False)
    node = TeleopNode(cfg, bus, ScriptedDevice([np.zeros(7)]))
    with node.device:
        node.tick()
    assert len(bus.sent["/robotrl/teleop/action"]) == 1 and not bus.sent["/robotrl/action"]


def test_expert_acts_only_on_fresh_state():
    bus = FakeTransport()
    cfg = TeleopNodeConfig(profile="sim", device="expert", task="reach", state_timeout_s=0.05)
    now = [0]  # the state cache's clock [ns]
    node = TeleopNode(cfg, bus, clock_ns=lambda: now[0])
    env = sim.make("reach")
    obs, _ = env.reset(seed=0)
    with node.device:
        assert node.tick() is None  # no state yet
        for topic, msg in state_messages(obs, 1, SIM, task_keys=["goal_pos"]).items():
            bus.publisher(topic, type(msg)).publish(msg)
        cmd = node.tick()
        assert cmd is not None and cmd.intervene
        expected = sim.make_expert("reach", env)(obs)
        np.testing.assert_array_equal(cmd.action, expected)
        now[0] += 60_000_000  # 60 ms later, no new state
        assert node.tick() is None  # stale: no motion
    assert node.stats.skipped_stale == 2 and node.stats.ticks == 1


def test_lockstep_runs_episodes_with_tagged_actions():
    bus = FakeTransport()
    sim_node = LockstepSim(bus, "reach")
    cfg = TeleopNodeConfig(
        profile="sim", device="expert", task="reach", lockstep=True, episodes=2, seed=4
    )
    try:
        stats = TeleopNode(cfg, bus).run()
    finally:
        sim_node.close()
    assert stats.episodes == 2
    tags = [parse_action_tag(a.layout.dim[0].label) for a in bus.sent["/robotrl/action"]]
    seeds = sorted({t[0] for t in tags})
    assert seeds == [4, 5]
    for s in seeds:
        steps = [t[1] for t in tags if t[0] == s]
        assert steps == list(range(len(steps))) and len(steps) > 5
    assert [r.data[0] for r in bus.sent["/robotrl/reset"]] == [4.0, 5.0]


def test_config_rejects_unknown_devices_and_lockstep_without_expert():
    with pytest.raises(ConfigError, match="unknown device 'joystick'"):
        TeleopNodeConfig(device="joystick")
    node = TeleopNode(
        TeleopNodeConfig(device="scripted", lockstep=True, episodes=1),
        FakeTransport(),
        ScriptedDevice([]),
    )
    with pytest.raises(ValueError, match="expert device"):
        node.run_lockstep()


def test_operator_keys_reset_the_next_episode_when_the_robot_cuts_episodes():
    bus = FakeTransport()
    move = np.array([0.1, 0, 0, 0, 0, 0, -1.0])
    script = [
        TeleopCommand(move, True),
        TeleopCommand.idle(-1.0, frozenset({"success"})),
        TeleopCommand.idle(-1.0, frozenset({"rerecord"})),
        TeleopCommand.idle(-1.0, frozenset({"failure"})),
    ]
    cfg = TeleopNodeConfig(profile="sim", device="scripted", seed=3)
    node = TeleopNode(cfg, bus, ScriptedDevice(script))
    with node.device:
        for _ in script:
            node.tick()
    assert [r.data[0] for r in bus.sent["/robotrl/reset"]] == [4.0, 4.0, 5.0]
    assert len(bus.sent["/robotrl/action"]) == 4 and not bus.sent["/robotrl/episode"]


def test_auto_reset_follows_the_robots_episode_ends():
    from hardware.ros2 import messages as m

    bus = FakeTransport()
    cfg = TeleopNodeConfig(profile="sim", device="scripted", auto_reset=True, episodes=2, seed=7)
    node = TeleopNode(cfg, bus, ScriptedDevice([np.zeros(7)] * 10))
    episode = bus.publisher("/robotrl/episode", m.Float64MultiArray)

    def end(seed: float, step: float = 3.0) -> None:
        episode.publish(m.Float64MultiArray(data=[seed, step, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]))

    with node.device:
        assert node.tick() is None  # the first tick resets seed 7
        assert node.tick() is not None and node.tick() is not None
        end(6.0)  # another episode's end: ignored
        assert node.tick() is not None
        end(7.0)
        assert node.tick() is None and node.stats.episodes == 1  # reset seed 8
        assert node.tick() is not None
        end(8.0)
        node.tick()
    assert node._done and node.stats.episodes == 2
    assert [r.data[0] for r in bus.sent["/robotrl/reset"]] == [7.0, 8.0]
    assert len(bus.sent["/robotrl/action"]) == 4
