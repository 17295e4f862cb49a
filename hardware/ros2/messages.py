"""ROS 2-compatible message types for the Cyclone DDS transport.

Each class is the DDS struct a ROS 2 node puts on the wire for that message: IDL type name
``<pkg>::msg::dds_::<Name>_`` (``typename="<pkg>.msg.dds_.<Name>_"`` below), ``@final``
extensibility, no key fields, classic CDR (XCDR1) encoding; field order and types follow the
``.msg`` definitions of ROS 2 Jazzy (identical for Humble/Iron for these types). Serialised bytes
equal ``rosbags``' ``serialize_cdr`` for the same values (``tests/test_messages.py``).

``TYPE_HASHES`` holds each type's RIHS01 hash (Iron/Jazzy put ``typehash=RIHS01_<hex>;`` in
endpoint USER_DATA); the values are what ``rosbags`` computes (checked in the tests).

Conventions: sequences of ``float64`` are Python lists of float; ``uint8[]`` (image data) is a
list of int on receipt (``bytes`` are accepted when publishing; ``bytes(msg.data)`` converts
back; Cyclone's XTypes builder rejects a ``bytes`` field); ``geometry_msgs/Quaternion`` is
(x, y, z, w) as in ROS; time is ``sec`` + ``nanosec``.
"""

from dataclasses import dataclass, field
from typing import Any

from cyclonedds.idl import IdlStruct
from cyclonedds.idl.annotations import final
from cyclonedds.idl.types import float64, int32, sequence, uint8, uint32

from hardware.ros2.cdr import decode_joint_state, encode_joint_state

# --- builtin_interfaces / std_msgs ------------------------------------------------------------


@dataclass
@final
class Time(IdlStruct, typename="builtin_interfaces.msg.dds_.Time_"):
    """builtin_interfaces/Time: seconds + nanoseconds since the epoch (or sim start)."""

    sec: int32 = 0
    nanosec: uint32 = 0


@dataclass
@final
class Header(IdlStruct, typename="std_msgs.msg.dds_.Header_"):
    """std_msgs/Header: stamp and the frame the data is expressed in."""

    stamp: Time = field(default_factory=Time)
    frame_id: str = ""


@dataclass
@final
class Bool(IdlStruct, typename="std_msgs.msg.dds_.Bool_"):
    """std_msgs/Bool."""

    data: bool = False


@dataclass
@final
class String(IdlStruct, typename="std_msgs.msg.dds_.String_"):
    """std_msgs/String (status and reason texts)."""

    data: str = ""


@dataclass
@final
class MultiArrayDimension(IdlStruct, typename="std_msgs.msg.dds_.MultiArrayDimension_"):
    """std_msgs/MultiArrayDimension."""

    label: str = ""
    size: uint32 = 0
    stride: uint32 = 0


@dataclass
@final
class MultiArrayLayout(IdlStruct, typename="std_msgs.msg.dds_.MultiArrayLayout_"):
    """std_msgs/MultiArrayLayout."""

    dim: sequence[MultiArrayDimension] = field(default_factory=list)
    data_offset: uint32 = 0


@dataclass
@final
class Float64MultiArray(IdlStruct, typename="std_msgs.msg.dds_.Float64MultiArray_"):
    """std_msgs/Float64MultiArray: a flat float64 vector (layout usually empty)."""

    layout: MultiArrayLayout = field(default_factory=MultiArrayLayout)
    data: sequence[float64] = field(default_factory=list)


# --- sensor_msgs -------------------------------------------------------------------------------


@dataclass
@final
class JointState(IdlStruct, typename="sensor_msgs.msg.dds_.JointState_"):
    """sensor_msgs/JointState: per named joint position [rad or m], velocity, effort [Nm or N]."""

    header: Header = field(default_factory=Header)
    name: sequence[str] = field(default_factory=list)
    position: sequence[float64] = field(default_factory=list)
    velocity: sequence[float64] = field(default_factory=list)
    effort: sequence[float64] = field(default_factory=list)

    # The 1 kHz topic: XCDR1 little endian goes through the hand-written codec (the same bytes,
    # faster: docs/ros2.md); anything else falls back to cyclonedds' generic serialiser.
    def serialize(self, buffer: Any = None, endianness: Any = None, use_version_2: Any = None):
        if buffer is None and endianness is None and not use_version_2:
            t = self.header.stamp
            return encode_joint_state(t.sec, t.nanosec, self.header.frame_id, self)
        return super().serialize(buffer, endianness, use_version_2)

    @classmethod
    def deserialize(cls, data: Any, has_header: bool = True, use_version_2: Any = None):
        if has_header and use_version_2 is None and bytes(data[:2]) == b"\x00\x01":
            sec, nsec, frame, name, pos, vel, eff = decode_joint_state(data)
            return cls(Header(Time(sec, nsec), frame), name, pos, vel, eff)
        return super().deserialize(data, has_header=has_header, use_version_2=use_version_2)


@dataclass
@final
class Image(IdlStruct, typename="sensor_msgs.msg.dds_.Image_"):
    """sensor_msgs/Image: raw pixels, ``step`` bytes per row, ``encoding`` e.g. ``rgb8``."""

    header: Header = field(default_factory=Header)
    height: uint32 = 0
    width: uint32 = 0
    encoding: str = ""
    is_bigendian: uint8 = 0
    step: uint32 = 0
    data: sequence[uint8] = field(default_factory=list)


@dataclass
@final
class CompressedImage(IdlStruct, typename="sensor_msgs.msg.dds_.CompressedImage_"):
    """sensor_msgs/CompressedImage: ``format`` ``jpeg`` or ``png``, encoded bytes."""

    header: Header = field(default_factory=Header)
    format: str = ""
    data: sequence[uint8] = field(default_factory=list)


# --- geometry_msgs -----------------------------------------------------------------------------


@dataclass
@final
class Point(IdlStruct, typename="geometry_msgs.msg.dds_.Point_"):
    """geometry_msgs/Point [m]."""

    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0


@dataclass
@final
class Quaternion(IdlStruct, typename="geometry_msgs.msg.dds_.Quaternion_"):
    """geometry_msgs/Quaternion (x, y, z, w); the default is the identity."""

    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0
    w: float64 = 1.0


@dataclass
@final
class Vector3(IdlStruct, typename="geometry_msgs.msg.dds_.Vector3_"):
    """geometry_msgs/Vector3."""

    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0


@dataclass
@final
class Pose(IdlStruct, typename="geometry_msgs.msg.dds_.Pose_"):
    """geometry_msgs/Pose: position [m] and orientation of a frame."""

    position: Point = field(default_factory=Point)
    orientation: Quaternion = field(default_factory=Quaternion)


@dataclass
@final
class PoseStamped(IdlStruct, typename="geometry_msgs.msg.dds_.PoseStamped_"):
    """geometry_msgs/PoseStamped: a pose in ``header.frame_id``."""

    header: Header = field(default_factory=Header)
    pose: Pose = field(default_factory=Pose)


@dataclass
@final
class Twist(IdlStruct, typename="geometry_msgs.msg.dds_.Twist_"):
    """geometry_msgs/Twist: linear [m/s] and angular [rad/s] velocity."""

    linear: Vector3 = field(default_factory=Vector3)
    angular: Vector3 = field(default_factory=Vector3)


@dataclass
@final
class TwistStamped(IdlStruct, typename="geometry_msgs.msg.dds_.TwistStamped_"):
    """geometry_msgs/TwistStamped."""

    header: Header = field(default_factory=Header)
    twist: Twist = field(default_factory=Twist)


@dataclass
@final
class Wrench(IdlStruct, typename="geometry_msgs.msg.dds_.Wrench_"):
    """geometry_msgs/Wrench: force [N] and torque [Nm]."""

    force: Vector3 = field(default_factory=Vector3)
    torque: Vector3 = field(default_factory=Vector3)


@dataclass
@final
class WrenchStamped(IdlStruct, typename="geometry_msgs.msg.dds_.WrenchStamped_"):
    """geometry_msgs/WrenchStamped."""

    header: Header = field(default_factory=Header)
    wrench: Wrench = field(default_factory=Wrench)


# --- registry ----------------------------------------------------------------------------------

MESSAGES: dict[str, type[IdlStruct]] = {
    cls.__name__: cls
    for cls in (
        Time,
        Header,
        Bool,
        String,
        MultiArrayDimension,
        MultiArrayLayout,
        Float64MultiArray,
        JointState,
        Image,
        CompressedImage,
        Point,
        Quaternion,
        Vector3,
        Pose,
        PoseStamped,
        Twist,
        TwistStamped,
        Wrench,
        WrenchStamped,
    )
}
"""Short name (``"JointState"``) -> message class."""

TYPE_HASHES: dict[str, str] = {
    "builtin_interfaces/msg/Time": (
        "RIHS01_b106235e25a4c5ed35098aa0a61a3ee9c9b18d197f398b0e4206cea9acf9c197"
    ),
    "std_msgs/msg/Header": (
        "RIHS01_f49fb3ae2cf070f793645ff749683ac6b06203e41c891e17701b1cb597ce6a01"
    ),
    "std_msgs/msg/Bool": (
        "RIHS01_feb91e995ff9ebd09c0cb3d2aed18b11077585839fb5db80193b62d74528f6c9"
    ),
    "std_msgs/msg/String": (
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
    ),
    "std_msgs/msg/MultiArrayDimension": (
        "RIHS01_5e773a60a4c7fc8a54985f307c7837aa2994252a126c301957a24e31282c9cbe"
    ),
    "std_msgs/msg/MultiArrayLayout": (
        "RIHS01_4c66e6f78e740ac103a94cf63259f968e48c617e7699e829b63c21a5cb50dac6"
    ),
    "std_msgs/msg/Float64MultiArray": (
        "RIHS01_1025ddc6b9552d191f89ef1a8d2f60f3d373e28b283d8891ddcc974e8c55397f"
    ),
    "sensor_msgs/msg/JointState": (
        "RIHS01_a13ee3a330e346c9d87b5aa18d24e11690752bd33a0350f11c5882bc9179260e"
    ),
    "sensor_msgs/msg/Image": (
        "RIHS01_d31d41a9a4c4bc8eae9be757b0beed306564f7526c88ea6a4588fb9582527d47"
    ),
    "sensor_msgs/msg/CompressedImage": (
        "RIHS01_15640771531571185e2efc8a100baf923961a4d15d5569652e6cb6691e8e371a"
    ),
    "geometry_msgs/msg/Point": (
        "RIHS01_6963084842a9b04494d6b2941d11444708d892da2f4b09843b9c43f42a7f6881"
    ),
    "geometry_msgs/msg/Quaternion": (
        "RIHS01_8a765f66778c8ff7c8ab94afcc590a2ed5325a1d9a076ffff38fbce36f458684"
    ),
    "geometry_msgs/msg/Vector3": (
        "RIHS01_cc12fe83e4c02719f1ce8070bfd14aecd40f75a96696a67a2a1f37f7dbb0765d"
    ),
    "geometry_msgs/msg/Pose": (
        "RIHS01_d501954e9476cea2996984e812054b68026ae0bfae789d9a10b23daf35cc90fa"
    ),
    "geometry_msgs/msg/PoseStamped": (
        "RIHS01_10f3786d7d40fd2b54367835614bff85d4ad3b5dab62bf8bca0cc232d73b4cd8"
    ),
    "geometry_msgs/msg/Twist": (
        "RIHS01_9c45bf16fe0983d80e3cfe750d6835843d265a9a6c46bd2e609fcddde6fb8d2a"
    ),
    "geometry_msgs/msg/TwistStamped": (
        "RIHS01_5f0fcd4f81d5d06ad9b4c4c63e3ea51b82d6ae4d0558f1d475229b1121db6f64"
    ),
    "geometry_msgs/msg/Wrench": (
        "RIHS01_018e8519d57c16adbe97c9fe1460ef21fec7e31bc541de3d653a35895677ce52"
    ),
    "geometry_msgs/msg/WrenchStamped": (
        "RIHS01_8dc3deaf06b2ab281f9f9a742a8961c328ca7cec16e3fd6586d3a5c83fa78f77"
    ),
}
"""ROS type name (``"sensor_msgs/msg/JointState"``) -> RIHS01 type hash."""


def ros_type_name(msg_type: type[IdlStruct]) -> str:
    """ROS type name of a message class: ``JointState`` -> ``"sensor_msgs/msg/JointState"``."""
    idl = msg_type.__idl_typename__  # e.g. "sensor_msgs.msg.dds_.JointState_" (dots or ::)
    parts = idl.replace("::", ".").split(".")
    if len(parts) != 4 or parts[1] != "msg" or parts[2] != "dds_" or not parts[3].endswith("_"):
        raise ValueError(f"expected a '<pkg>.msg.dds_.<Name>_' IDL type name, got {idl!r}")
    return f"{parts[0]}/msg/{parts[3][:-1]}"


def type_hash(msg_type: type[IdlStruct]) -> str:
    """RIHS01 hash string of a message class (``"RIHS01_<64 hex>"``)."""
    name = ros_type_name(msg_type)
    if name not in TYPE_HASHES:
        raise KeyError(f"no RIHS01 hash for {name!r}; known: {sorted(TYPE_HASHES)}")
    return TYPE_HASHES[name]


def stamp(time_ns: int) -> Time:
    """``Time`` from integer nanoseconds (non-negative)."""
    if time_ns < 0:
        raise ValueError(f"expected time_ns >= 0, got {time_ns}")
    sec, nanosec = divmod(int(time_ns), 1_000_000_000)
    return Time(sec=sec, nanosec=nanosec)


def time_ns(t: Time) -> int:
    """Integer nanoseconds of a ``Time``."""
    return int(t.sec) * 1_000_000_000 + int(t.nanosec)
