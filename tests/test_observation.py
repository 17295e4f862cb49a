"""State topics <-> observation dict: the env's observation survives messages exactly; the
stamped cache assembles one stamp or the newest state with its age; bad messages are counted."""

from __future__ import annotations

import numpy as np
import pytest
from ros2_fakes import FakeTransport

import sim
from hardware.ros2 import messages as m
from hardware.ros2.observation import (
    READER_DEPTH,
    StateCache,
    StateError,
    deep_reader_qos,
    image_obs,
    joint_state_obs,
    state_messages,
)
from hardware.ros2.topics import GENERIC, SIM


@pytest.mark.parametrize(
    "profile", [SIM, GENERIC.with_overrides({"ee_twist": "/twist"})], ids=["sim", "generic"]
)
def test_env_observation_round_trips_bit_exactly(profile):
    env = sim.make("lift")
    obs, _ = env.reset(seed=3)
    for _ in range(5):
        obs, *_ = env.step(np.array([0.5, -0.3, 0.2, 0.1, 0.0, -0.1, 1.0]))
    cache = StateCache(profile, task_state=True)
    bus = FakeTransport()
    cache.subscribe(bus)
    msgs = state_messages(obs, 123_456_789, profile, task_keys=["cube_pos", "cube_quat"])
    for topic, msg in msgs.items():
        bus.publisher(topic, type(msg)).publish(msg)
    got = cache.at(123_456_789)
    assert got is not None and set(got) == set(obs)
    for k, v in obs.items():
        assert got[k].dtype == np.float32
        np.testing.assert_array_equal(got[k], v, err_msg=k)
    assert cache.at(123_456_790) is None  # another stamp: nothing assembled


def test_cache_at_waits_for_every_topic_and_latest_reports_age():
    now = [0]
    cache = StateCache(SIM, clock_ns=lambda: now[0])
    env = sim.make("reach")
    obs, _ = env.reset(seed=0)
    msgs = state_messages(obs, 1_000, SIM)
    assert cache.latest() is None
    for topic, msg in list(msgs.items())[:-1]:
        cache.put(topic, msg)
    assert cache.at(1_000) is None and cache.missing() == [list(msgs)[-1]]
    assert cache.wait_at(1_000, 0.01) is None
    now[0] = 5_000_000
    cache.put(*list(msgs.items())[-1])
    now[0] = 25_000_000
    latest, age = cache.latest()
    assert age == pytest.approx(0.025)  # the oldest part was received at t = 0
    np.testing.assert_array_equal(latest["state/ee_pos"], obs["state/ee_pos"])


def test_bad_messages_are_counted_not_raised():
    cache = StateCache(SIM)
    cache.put("/joint_states", m.JointState(name=["a"], position=[0.0], velocity=[0.0]))
    assert cache.errors == 1 and "lacks joints" in cache.last_error
    with pytest.raises(StateError, match="lacks joints"):
        joint_state_obs(m.JointState(name=["x"], position=[1.0]), ["fr3_joint1"])


def test_image_conversion_and_encoding_check():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    msg = m.Image(height=2, width=3, encoding="rgb8", step=9, data=img.tobytes())
    np.testing.assert_array_equal(image_obs(msg, "front")["images/front"], img)
    msg.encoding = "bgr8"
    with pytest.raises(StateError, match="rgb8"):
        image_obs(msg, "front")


def test_consumed_stamps_are_dropped_and_history_is_bounded():
    cache = StateCache(SIM, history=3)
    env = sim.make("reach")
    obs, _ = env.reset(seed=0)
    for t in range(1, 6):
        for topic, msg in state_messages(obs, t, SIM).items():
            cache.put(topic, msg)
    assert cache.at(2) is None and cache.at(3) is not None  # only the newest 3 stamps kept
    cache.drop_before(5)
    assert cache.at(4) is None and cache.at(5) is not None


def test_wait_hold_prefers_the_exact_stamp_else_holds_fresh_state():
    cache = StateCache(SIM)
    env = sim.make("reach")
    obs0, _ = env.reset(seed=0)
    obs1, *_ = env.step(np.full(7, 0.5))
    for t, obs in ((1_000, obs0), (9_000, obs1)):
        for topic, msg in state_messages(obs, t, SIM).items():
            cache.put(topic, msg)
    exact = cache.wait_hold(1_000, 0.0, 1e-6)
    np.testing.assert_array_equal(exact["state/ee_pos"], obs0["state/ee_pos"])
    held = cache.wait_hold(5_000, 1.0, 1e-3)  # every topic published past 5 us: no waiting
    np.testing.assert_array_equal(held["state/ee_pos"], obs0["state/ee_pos"])
    assert cache.wait_hold(5_000, 1.0, 1e-6) is None  # the hold is 4 us old > 1 us bound
    assert cache.wait_hold(500, 0.0, 1.0) is None  # nothing at or before 0.5 us
    cache.drop_before(5_000)  # keeps the sample holding 5 us
    assert cache.wait_hold(6_000, 0.0, 1e-3) is not None


def test_deep_reader_qos_only_for_the_robotrl_transports():
    from hardware.ros2.transport import CycloneTransport, QoS, RclpyTransport

    for cls in (CycloneTransport, RclpyTransport):  # no participant or node is created
        assert deep_reader_qos(object.__new__(cls)) == QoS(reliable=True, depth=READER_DEPTH)
    assert deep_reader_qos(FakeTransport()) is None  # test doubles keep their default
