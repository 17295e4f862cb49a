"""One small pub/sub API over ROS 2 topics, with two implementations.

- :class:`CycloneTransport` (PyPI ``cyclonedds``, no ROS install): speaks to ROS 2 nodes on the
  wire: topic ``/joint_states`` is DDS topic ``rt/joint_states``; types are the
  :mod:`hardware.ros2.messages` structs (``sensor_msgs::msg::dds_::JointState_``, ``@final``,
  XCDR1); endpoint USER_DATA carries ``typehash=RIHS01_<hex>;`` (Iron/Jazzy check it); the domain
  id is ``ROS_DOMAIN_ID`` (default 0).
- :class:`RclpyTransport` (a sourced ROS 2 install): an rclpy node that publishes and receives
  the same CDR bytes (``raw=True`` subscriptions, serialised publishes), so callers use the same
  message classes with either transport. rclpy is not installable on the dev machines; this
  class is kept small and is exercised only on robots.

The interface, :class:`QoS` and topic naming are :mod:`hardware.ros2.endpoint`; the two
implementations are :mod:`hardware.ros2.cyclone_transport` and
:mod:`hardware.ros2.rclpy_transport`; this module re-exports them all and picks one
(:func:`make_transport`).

QoS (see :class:`QoS`): writers are RELIABLE (rclpy subscribers default to RELIABLE), KEEP_LAST
depth 10, TRANSIENT_LOCAL only for latched topics; high-rate sensor readers may be BEST_EFFORT.

Callbacks run on the transport's receive thread (Cyclone's listener thread or the rclpy
executor thread): keep them short (copy into a buffer, set an event) and thread-safe.

Example::

    with make_transport(node_name="bridge") as tr:
        pub = tr.publisher("/robotrl/action", Float64MultiArray)
        tr.subscribe("/joint_states", JointState, on_joints, SENSOR_QOS)
        pub.publish(Float64MultiArray(data=[0.0] * 7))
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from hardware.ros2.cyclone_transport import CycloneTransport, loopback_config
from hardware.ros2.endpoint import (
    DEFAULT_QOS,
    LATCHED_QOS,
    SENSOR_QOS,
    Publisher,
    QoS,
    Subscription,
    Transport,
    TransportError,
    dds_topic_name,
    domain_id_from_env,
)
from hardware.ros2.rclpy_transport import RclpyTransport

__all__ = [  # the names of the interface and both implementations, importable from here
    "DEFAULT_QOS",
    "LATCHED_QOS",
    "SENSOR_QOS",
    "TRANSPORTS",
    "CycloneTransport",
    "Publisher",
    "QoS",
    "RclpyTransport",
    "Subscription",
    "Transport",
    "TransportError",
    "dds_topic_name",
    "domain_id_from_env",
    "loopback_config",
    "make_transport",
    "rclpy_available",
]


def rclpy_available() -> bool:
    """True when ``rclpy`` can be imported (a sourced ROS 2 install)."""
    return importlib.util.find_spec("rclpy") is not None


TRANSPORTS: dict[str, Callable[..., Transport]] = {
    "cyclonedds": CycloneTransport,
    "rclpy": RclpyTransport,
}


def make_transport(
    kind: str = "auto", domain_id: int | None = None, node_name: str = "robotrl"
) -> Transport:
    """Build a transport: ``"auto"`` = rclpy when importable, else Cyclone DDS.

    Args:
        kind: ``"auto"``, ``"rclpy"`` or ``"cyclonedds"``.
        domain_id: DDS / ROS domain; ``None`` reads ``ROS_DOMAIN_ID``.
        node_name: ROS node name (rclpy) or DDS participant name (Cyclone).
    """
    if kind == "auto":
        kind = "rclpy" if rclpy_available() else "cyclonedds"
    if kind not in TRANSPORTS:
        raise TransportError(f"expected transport kind in {['auto', *TRANSPORTS]}, got {kind!r}")
    return TRANSPORTS[kind](domain_id=domain_id, node_name=node_name)
