"""ROS 2 bags written with rosbags itself (sqlite3 and MCAP) import into the episode store on
the control grid, with zero-order hold of each topic."""

import numpy as np
import pytest

pytest.importorskip("rosbags", reason="rosbags is in the 'ros2' extra")

from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from robotrl.datasets import verify
from robotrl.datasets.rosbag_import import (
    BagImportError,
    BagTopics,
    import_bags,
)

TS = get_typestore(Stores.ROS2_HUMBLE)
T = TS.types
NS = 1_000_000_000
T0 = 1_700_000_000 * NS


def _header(t_ns):
    return T["std_msgs/msg/Header"](
        stamp=T["builtin_interfaces/msg/Time"](sec=t_ns // NS, nanosec=t_ns % NS), frame_id="base"
    )


def _joint_state(t, names, pos):
    return T["sensor_msgs/msg/JointState"](
        header=_header(t),
        name=list(names),
        position=np.asarray(pos, float),
        velocity=np.full(len(names), 0.5),
        effort=np.zeros(0),
    )


def _write_bag(path, storage, duration=1.0, jitter_seed=0, topics=None):
    """JointState at 100 Hz, pose + wrench at 50 Hz, a camera at 10 Hz, actions at 20 Hz, on
    the topics of ``topics`` (default :data:`TOPICS`; with ``gripper_joint_states`` the
    fingers have their own JointState topic, as franka_gripper's)."""
    topics = topics or TOPICS
    rng = np.random.default_rng(jitter_seed)
    with Writer(path, version=9, storage_plugin=storage) as w:
        c = {
            "js": w.add_connection(topics.joint_states, "sensor_msgs/msg/JointState", typestore=TS),
            "pose": w.add_connection(topics.ee_pose, "geometry_msgs/msg/PoseStamped", typestore=TS),
            "wrench": w.add_connection(
                topics.wrench, "geometry_msgs/msg/WrenchStamped", typestore=TS
            ),
            "cam": w.add_connection(topics.cameras["front"], "sensor_msgs/msg/Image", typestore=TS),
            "act": w.add_connection(topics.action, "std_msgs/msg/Float64MultiArray", typestore=TS),
            "int": w.add_connection(topics.intervention, "std_msgs/msg/Bool", typestore=TS),
        }
        separate = topics.gripper_joint_states
        if separate:
            c["fingers"] = w.add_connection(separate, "sensor_msgs/msg/JointState", typestore=TS)
        msgs = []
        for k in range(int(duration * 100)):
            t = T0 + k * NS // 100 + int(rng.integers(0, 200_000))
            arm = np.arange(7) + k * 1e-3
            if separate:
                msgs.append((t, c["js"], _joint_state(t, topics.arm_joints, arm)))
                if k % 2 == 0:  # the gripper at 50 Hz
                    fingers = _joint_state(t, topics.gripper_joints, [0.01, 0.01])
                    msgs.append((t, c["fingers"], fingers))
            else:
                names = [*topics.arm_joints, *topics.gripper_joints]
                msgs.append((t, c["js"], _joint_state(t, names, np.r_[arm, 0.01, 0.01])))
        for k in range(int(duration * 50)):
            t = T0 + k * NS // 50
            P = T["geometry_msgs/msg/Point"](x=0.5 + k * 1e-3, y=0.0, z=0.3)
            Q = T["geometry_msgs/msg/Quaternion"](x=1.0, y=0.0, z=0.0, w=0.0)
            pose = T["geometry_msgs/msg/Pose"](position=P, orientation=Q)
            msgs.append(
                (t, c["pose"], T["geometry_msgs/msg/PoseStamped"](header=_header(t), pose=pose))
            )
            V = T["geometry_msgs/msg/Vector3"]
            wr = T["geometry_msgs/msg/Wrench"](
                force=V(x=1.0, y=2.0, z=float(k)), torque=V(x=0.0, y=0.0, z=0.1)
            )
            msgs.append(
                (t, c["wrench"], T["geometry_msgs/msg/WrenchStamped"](header=_header(t), wrench=wr))
            )
        for k in range(int(duration * 10)):
            t = T0 + k * NS // 10
            img = np.zeros((4, 6, 3), np.uint8)
            img[..., 2] = k  # bgr8: the last byte (red) counts frames
            msgs.append(
                (
                    t,
                    c["cam"],
                    T["sensor_msgs/msg/Image"](
                        header=_header(t),
                        height=4,
                        width=6,
                        encoding="bgr8",
                        is_bigendian=0,
                        step=18,
                        data=img.reshape(-1),
                    ),
                )
            )
        for k in range(int(duration * 20)):
            t = T0 + k * NS // 20 + 1_000_000  # the policy answers 1 ms after each tick
            layout = T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
            a = np.full(7, k / 100.0)
            msgs.append((t, c["act"], T["std_msgs/msg/Float64MultiArray"](layout=layout, data=a)))
            msgs.append((t, c["int"], T["std_msgs/msg/Bool"](data=k >= 10)))
        for t, conn, m in sorted(msgs, key=lambda x: x[0]):
            w.write(conn, t, TS.serialize_cdr(m, conn.msgtype))


TOPICS = BagTopics(cameras={"front": "/cam/front"})


@pytest.mark.parametrize("storage", [StoragePlugin.SQLITE3, StoragePlugin.MCAP])
def test_bag_imports_on_the_control_grid(tmp_path, storage):
    _write_bag(tmp_path / "bag", storage)
    store = import_bags(
        [tmp_path / "bag"], tmp_path / "s.zarr", topics=TOPICS, task="lift", success=True
    )
    ep = store.episode(0)
    n = len(ep["action"])
    assert 17 <= n <= 20  # 1 s at 20 Hz, from the first instant every topic has spoken
    # Step k sees the newest message at or before its grid time: JointState at ~100 Hz.
    assert ep["state/joint_pos"].shape == (n, 7)
    np.testing.assert_allclose(np.diff(ep["state/joint_pos"][:, 0]), 0.005, atol=1.1e-3)
    np.testing.assert_allclose(ep["state/gripper"][:, 0], 0.02)
    np.testing.assert_allclose(ep["state/ee_quat"][0], [0, 1, 0, 0])
    np.testing.assert_allclose(ep["state/wrench"][:, :2], [[1, 2]] * n)
    np.testing.assert_allclose(np.diff(ep["state/wrench"][:, 2]), 2.5, atol=1.01)
    # The camera runs at 10 Hz: each frame is held for two control steps, RGB order restored.
    frames = ep["images/front"][:, 0, 0, 0]
    assert ep["images/front"].shape == (n, 4, 6, 3)
    assert np.all(np.diff(frames) >= 0) and np.all(np.diff(frames) <= 1)
    assert ep["images/front"][..., 1:].max() == 0  # red first: BGR was converted to RGB
    # Action k was published just after tick k: it lines up with that step's observation.
    np.testing.assert_allclose(np.diff(ep["action"][:, 0]), 0.01, atol=1e-6)
    assert ep["intervention"][-1] and not ep["intervention"][0]
    assert bool(ep["success"]) and ep["task"] == "lift"
    store.close()
    assert verify(tmp_path / "s.zarr")["ok"]


def test_several_bags_append_episodes(tmp_path):
    for i in range(2):
        _write_bag(tmp_path / f"bag{i}", StoragePlugin.SQLITE3, jitter_seed=i)
    store = import_bags(
        [tmp_path / "bag0", tmp_path / "bag1"],
        tmp_path / "s.zarr",
        topics=TOPICS,
        success=[True, False],
    )
    assert store.num_episodes == 2
    np.testing.assert_array_equal(store.meta("success"), [True, False])
    store.close()


def test_missing_topic_and_unreadable_bag_are_clear_errors(tmp_path):
    _write_bag(tmp_path / "bag", StoragePlugin.SQLITE3)
    with pytest.raises(BagImportError, match="no messages on"):
        import_bags(
            [tmp_path / "bag"],
            tmp_path / "s.zarr",
            topics=BagTopics(cameras={"wrist": "/cam/wrist"}),
        )
    assert not (tmp_path / "s.zarr").exists()  # nothing written for a bad bag
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "metadata.yaml").write_text("not: a bag")
    with pytest.raises(BagImportError, match="cannot read bag"):
        import_bags([tmp_path / "junk"], tmp_path / "s.zarr")


def test_wrong_message_type_on_a_topic(tmp_path):
    _write_bag(tmp_path / "bag", StoragePlugin.SQLITE3)
    with pytest.raises(BagImportError, match="expected geometry_msgs/msg/PoseStamped"):
        topics = BagTopics(ee_pose="/robotrl/wrench", wrench=None)
        import_bags([tmp_path / "bag"], tmp_path / "s.zarr", topics=topics)
    with pytest.raises(ValueError, match="more than one entry"):
        BagTopics(ee_pose="/robotrl/wrench")
