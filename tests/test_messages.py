"""ROS 2 message structs: bytes equal rosbags' CDR for every type, hashes equal rosbags' RIHS01."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")
pytest.importorskip("rosbags", reason="rosbags is in the 'ros2' extra")

from cyclonedds.idl import IdlStruct
from rosbags.typesys import Stores, get_typestore

from hardware.ros2 import messages as m

pytestmark = pytest.mark.ros2

STORE = get_typestore(Stores.ROS2_JAZZY)


def _header(frame: str = "fr3_link0") -> m.Header:
    return m.Header(stamp=m.Time(sec=1_700_000_123, nanosec=987_654_321), frame_id=frame)


# Odd-length strings and sequences sit before float64 data so CDR alignment padding is exercised.
SAMPLES: list[IdlStruct] = [
    m.Time(sec=-5, nanosec=4_000_000_000),
    _header("a"),
    m.Bool(data=True),
    m.String(data="hold: state 61 ms old"),
    m.MultiArrayDimension(label="xyz", size=7, stride=14),
    m.MultiArrayLayout(dim=[m.MultiArrayDimension("a", 2, 6), m.MultiArrayDimension("bc", 3, 3)]),
    m.Float64MultiArray(
        layout=m.MultiArrayLayout(dim=[m.MultiArrayDimension("x", 3, 3)], data_offset=1),
        data=[0.5, -1.25, 3e-9],
    ),
    m.Float64MultiArray(data=[]),
    m.JointState(
        header=_header("b"),
        name=[f"fr3_joint{i}" for i in range(1, 8)],
        position=list(np.linspace(-1, 1, 7)),
        velocity=[0.1] * 7,
        effort=[],
    ),
    m.Image(
        header=_header("cam"),
        height=2,
        width=3,
        encoding="rgb8",
        is_bigendian=0,
        step=9,
        data=bytes(range(18)),
    ),
    m.CompressedImage(header=_header("cam1"), format="jpeg", data=b"\xff\xd8\xff\x00\x01"),
    m.Point(x=1.0, y=-2.0, z=3.5),
    m.Quaternion(x=0.0, y=0.7071, z=0.0, w=0.7071),
    m.Vector3(x=0.25, y=0.5, z=-0.75),
    m.Pose(position=m.Point(0.3, 0.0, 0.5), orientation=m.Quaternion(1.0, 0.0, 0.0, 0.0)),
    m.PoseStamped(header=_header("odd"), pose=m.Pose(position=m.Point(0.1, 0.2, 0.3))),
    m.Twist(linear=m.Vector3(0.1, 0.0, 0.0), angular=m.Vector3(0.0, 0.0, 0.2)),
    m.TwistStamped(header=_header("xy"), twist=m.Twist(linear=m.Vector3(1, 2, 3))),
    m.Wrench(force=m.Vector3(0, 0, -9.81), torque=m.Vector3(0.01, 0.02, 0.03)),
    m.WrenchStamped(header=_header("ee_"), wrench=m.Wrench(force=m.Vector3(1, 2, 3))),
]


def _to_rosbags(msg: IdlStruct) -> object:
    """The same values as a rosbags message, built field by field (no bytes involved)."""
    cls = STORE.types[m.ros_type_name(type(msg))]
    kwargs = {}
    for name in msg.__dataclass_fields__:
        value = getattr(msg, name)
        if isinstance(value, IdlStruct):
            value = _to_rosbags(value)
        elif isinstance(value, bytes) or (
            isinstance(value, list) and name == "data" and value and isinstance(value[0], int)
        ):
            value = np.frombuffer(bytes(value), dtype=np.uint8)
        elif isinstance(value, list) and value and isinstance(value[0], IdlStruct):
            value = [_to_rosbags(v) for v in value]
        elif isinstance(value, list) and (not value or isinstance(value[0], float)):
            value = np.asarray(value, dtype=np.float64)
        kwargs[name] = value
    return cls(**kwargs)


def test_every_listed_message_type_is_sampled() -> None:
    assert {type(s).__name__ for s in SAMPLES} == set(m.MESSAGES)
    assert set(m.TYPE_HASHES) == {m.ros_type_name(c) for c in m.MESSAGES.values()}


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda s: type(s).__name__)
def test_bytes_equal_rosbags_cdr(msg: IdlStruct) -> None:
    ros_name = m.ros_type_name(type(msg))
    ours = msg.serialize()
    theirs = bytes(STORE.serialize_cdr(_to_rosbags(msg), ros_name))
    assert ours[:4] == b"\x00\x01\x00\x00"  # CDR_LE encapsulation, XCDR1
    assert ours == theirs
    # and rosbags' bytes decode to the same values with our classes (uint8[] as a list of int)
    back = type(msg).deserialize(theirs)
    if isinstance(msg, m.Image | m.CompressedImage):
        assert bytes(back.data) == bytes(msg.data)
        back.data = msg.data
    assert back == msg


@pytest.mark.parametrize("cls", list(m.MESSAGES.values()), ids=lambda c: c.__name__)
def test_type_hash_matches_rosbags(cls: type[IdlStruct]) -> None:
    assert m.type_hash(cls) == STORE.hash_rihs01(m.ros_type_name(cls))


def test_dds_type_names_follow_ros_convention() -> None:
    assert m.JointState.__idl_typename__.replace("::", ".") == "sensor_msgs.msg.dds_.JointState_"
    assert m.ros_type_name(m.WrenchStamped) == "geometry_msgs/msg/WrenchStamped"
    assert m.ros_type_name(m.Time) == "builtin_interfaces/msg/Time"


def test_stamp_roundtrip_and_bad_input() -> None:
    t = m.stamp(12_345_678_901)
    assert (t.sec, t.nanosec) == (12, 345_678_901)
    assert m.time_ns(t) == 12_345_678_901
    with pytest.raises(ValueError, match="time_ns >= 0"):
        m.stamp(-1)


def test_joint_state_codec_equals_the_generic_serialiser() -> None:
    """The hand-written JointState codec (hardware/ros2/cdr.py) against cyclonedds' generic
    one: random frames, names of every padding length, empty and full sequences."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(0, 12))
        msg = m.JointState(
            header=m.Header(
                m.Time(int(rng.integers(-(2**31), 2**31)), int(rng.integers(0, 2**32))),
                "f" * int(rng.integers(0, 9)),
            ),
            name=["j" * int(rng.integers(0, 7)) + "é" * int(rng.integers(0, 2)) for _ in range(n)],
            position=list(rng.normal(size=n)),
            velocity=list(rng.normal(size=int(rng.integers(0, 2)) * n)),
            effort=list(rng.normal(size=int(rng.integers(0, 3)))),
        )
        fast = msg.serialize()
        assert fast == m.JointState.__idl__.serialize(msg)
        assert m.JointState.deserialize(fast) == msg
        assert m.JointState.__idl__.deserialize(fast) == msg
    big_endian = m.JointState.__idl__.serialize(msg, endianness=_big())
    assert m.JointState.deserialize(big_endian) == msg  # other encodings: generic path


def _big():
    from cyclonedds.idl._support import Endianness

    return Endianness.Big
