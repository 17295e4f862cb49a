"""Bags: a session recorded into a rosbag2 (sqlite3 and MCAP) holds rosbags-readable CDR;
replaying it onto a transport re-records the same episodes bit for bit; and
``robotrl dataset import --from rosbag`` (rosbag_import) of a sim-clock bag gives the in-process
session's observations and actions exactly."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from ros2_fakes import FakeTransport, LockstepSim
from waits import eventually

pytest.importorskip("rosbags", reason="rosbags is in the 'ros2' extra")

from hardware.ros2 import messages as m
from hardware.ros2.bag import (
    BagError,
    BagRecorder,
    profile_topics,
    read_messages,
    replay_bag,
)
from hardware.ros2.config import RecorderConfig, TeleopNodeConfig
from hardware.ros2.topics import SIM
from robotrl.algos.residual_split import RoleProcess
from robotrl.datasets import EpisodeStore
from robotrl.datasets.rosbag_import import bag_topics, import_bags
from robotrl.datasets.store_diff import diff_stores
from robotrl.nodes.recorder_node import RecorderNode
from robotrl.nodes.teleop_node import TeleopNode

TASK = "reach"


def _session(tmp_path, bag, *, episodes, profile=SIM, storage="sqlite3", store="live.zarr"):
    """Lockstep expert session on an in-memory bus, recorded by a recorder node and a bag."""
    bus = FakeTransport()
    sim_node = LockstepSim(bus, TASK, profile)
    recorder = BagRecorder(
        bag, bus, profile_topics(profile, task_state=True), storage=storage, clock="stamp"
    )
    overrides = {k: None for k in ("gripper_joint_states",) if profile.gripper_joint_states is None}
    rec = RecorderNode(
        RecorderConfig(
            profile="sim",
            topics=overrides,
            out=str(tmp_path / store),
            task=TASK,
            task_state=True,
            episodes=episodes,
        ),
        bus,
    )
    cfg = TeleopNodeConfig(
        profile="sim",
        topics=overrides,
        device="expert",
        task=TASK,
        lockstep=True,
        episodes=episodes,
        seed=11,
        expert_noise=0.2,
    )
    thread = threading.Thread(target=rec.run, kwargs={"timeout_s": 10.0})
    thread.start()
    try:
        TeleopNode(cfg, bus).run()
    finally:
        thread.join(timeout=30)
        rec.close()
        sim_node.close()
        recorder.close()
    assert rec.stats.recorded == episodes
    return recorder


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_replayed_bag_records_the_same_episodes(tmp_path, storage):
    bag = tmp_path / "session_bag"
    recorder = _session(tmp_path, bag, episodes=2, storage=storage)
    assert recorder.counts["/joint_states"] > 20 and recorder.counts["/robotrl/episode"] > 20
    # replay onto a fresh bus with a fresh recorder: the same store, bit for bit
    bus = FakeTransport()
    rec = RecorderNode(
        RecorderConfig(
            profile="sim", out=str(tmp_path / "replayed.zarr"), task=TASK, task_state=True
        ),
        bus,
    )
    published = replay_bag(bag, bus, rate=0)
    assert published == sum(recorder.counts.values())
    rec.run(timeout_s=0.5)
    rec.close()
    live = EpisodeStore.open(tmp_path / "live.zarr")
    replayed = EpisodeStore.open(tmp_path / "replayed.zarr")
    assert live.num_episodes == 2
    assert (
        diff_stores(live, replayed, ignore_keys=(), ignore_meta=("duration_s", "start_time")) == []
    )


def test_bag_bytes_are_what_rosbags_reads(tmp_path):
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    bag = tmp_path / "b"
    _session(tmp_path, bag, episodes=1)
    ours = {t: msg for t, _, msg in read_messages(bag)}
    store = get_typestore(Stores.ROS2_HUMBLE)
    with AnyReader([bag], default_typestore=store) as reader:
        seen = set()
        for conn, _, raw in reader.messages():
            theirs = reader.deserialize(raw, conn.msgtype)
            if conn.topic in seen:
                continue
            seen.add(conn.topic)
            assert bytes(store.serialize_cdr(theirs, conn.msgtype)) == bytes(raw), conn.topic
        assert conn.msgtype.startswith(("std_msgs/", "sensor_msgs/", "geometry_msgs/"))
    js = ours["/joint_states"]
    assert isinstance(js, m.JointState) and list(js.name[:2]) == ["fr3_joint1", "fr3_joint2"]
    with pytest.raises(BagError, match="exists"):
        BagRecorder(bag, FakeTransport(), {})


def test_rosbag_import_of_a_sim_clock_bag_matches_the_live_recording(tmp_path):
    bag = tmp_path / "episode_bag"
    profile = SIM.with_overrides({"gripper_joint_states": None})  # fingers in /joint_states
    _session(tmp_path, bag, episodes=1, profile=profile)
    store = import_bags([bag], tmp_path / "imported.zarr", topics=bag_topics(profile), fps=20.0)
    store.close()
    live = EpisodeStore.open(tmp_path / "live.zarr")
    imported = EpisodeStore.open(tmp_path / "imported.zarr")
    assert imported.num_steps == live.num_steps > 10
    keys = set(imported.keys) - {"timestamp", "reward"}  # the bag carries no reward
    assert keys >= {"state/joint_pos", "state/gripper", "state/ee_twist", "action"}
    assert keys <= set(live.keys)
    for key in sorted(keys):
        np.testing.assert_array_equal(imported.get(key), live.get(key), err_msg=key)
    np.testing.assert_allclose(imported.get("timestamp"), live.get("timestamp"), atol=1e-12)


@pytest.mark.slow
@pytest.mark.ros2
def test_robotrl_bag_record_info_and_play_over_dds(tmp_path, capsys):
    """The console script: record a publisher's messages from DDS, list them, play them back."""
    import json
    import os
    import random
    import subprocess
    import sys
    import time

    from hardware.ros2.bag import main
    from hardware.ros2.transport import CycloneTransport, loopback_config

    os.environ.setdefault("CYCLONEDDS_URI", loopback_config())  # before any participant
    env = {**os.environ, "ROS_DOMAIN_ID": str(random.randint(1, 230))}
    exe = os.path.join(os.path.dirname(sys.executable), "robotrl-bag")
    bag = tmp_path / "cli_bag"
    rec = RoleProcess(
        [exe, "record", str(bag), "--profile", "franka", "--progress", "0.05"], "recorder", env=env
    )
    tr = CycloneTransport(int(env["ROS_DOMAIN_ID"]), "pub")
    try:
        pub = tr.publisher("/robotrl/intervention", m.Bool)
        assert eventually(lambda: pub.matched_count() >= 1, 30), "the recorder never subscribed"
        for i in range(20):  # at a topic's pace: a burst can overrun a KEEP_LAST reader
            pub.publish(m.Bool(data=i % 2 == 0))
            time.sleep(0.01)
        # the recorder's progress lines say when all 20 are in the bag
        rec.wait_for(lambda line: line.get("recording", {}).get("/robotrl/intervention") == 20, 60)
        rec.stop(30)  # SIGTERM: the recorder finishes the bag
    finally:
        rec.stop(5)
        tr.close()
    assert rec.last["counts"]["/robotrl/intervention"] == 20

    capsys.readouterr()
    assert main(["info", str(bag)]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["topics"] == {"/robotrl/intervention": {"type": "Bool", "count": 20}}
    got = [msg.data for _, _, msg in read_messages(bag)]
    assert got == [i % 2 == 0 for i in range(20)]

    tr = CycloneTransport(int(env["ROS_DOMAIN_ID"]), "sub")
    received: list[bool] = []
    tr.subscribe("/robotrl/intervention", m.Bool, lambda msg: received.append(msg.data))
    try:
        played = subprocess.run(
            [exe, "play", str(bag), "--rate", "0", "--wait-subscribers", "1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert json.loads(played.stdout.strip().splitlines()[-1])["published"] == 20
        deadline = time.monotonic() + 5
        while len(received) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        tr.close()
    assert received == got
