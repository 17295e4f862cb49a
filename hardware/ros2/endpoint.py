"""What every transport shares: the :class:`Publisher` / :class:`Subscription` /
:class:`Transport` interfaces, endpoint :class:`QoS`, ROS topic -> DDS topic names, the ROS
domain id and :class:`TransportError`. The implementations are
:mod:`hardware.ros2.cyclone_transport` and :mod:`hardware.ros2.rclpy_transport`;
:func:`hardware.ros2.transport.make_transport` picks one.

QoS: writers are RELIABLE (rclpy subscribers default to RELIABLE), KEEP_LAST depth 10,
TRANSIENT_LOCAL only for latched topics; high-rate sensor readers may be BEST_EFFORT.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from cyclonedds.idl import IdlStruct

M = TypeVar("M", bound=IdlStruct)
M_contra = TypeVar("M_contra", bound=IdlStruct, contravariant=True)  # Publisher only takes M


class TransportError(RuntimeError):
    """A topic, type or QoS the transport cannot serve, or use after ``close()``."""


@dataclass(frozen=True)
class QoS:
    """Endpoint QoS (the subset ROS 2 nodes use).

    Attributes:
        reliable: RELIABLE if true, else BEST_EFFORT (readers only; a best-effort reader matches
            a reliable writer, never the reverse).
        depth: KEEP_LAST history depth.
        transient_local: TRANSIENT_LOCAL durability (latched topics: late joiners get the last
            ``depth`` samples); both ends must set it.
    """

    reliable: bool = True
    depth: int = 10
    transient_local: bool = False

    def __post_init__(self) -> None:
        if self.depth < 1:
            raise ValueError(f"expected QoS depth >= 1, got {self.depth}")


DEFAULT_QOS = QoS()
"""ROS 2 default: reliable, keep last 10, volatile."""
SENSOR_QOS = QoS(reliable=False, depth=10)
"""For readers of high-rate state (joint states, wrench, images): best effort."""
LATCHED_QOS = QoS(reliable=True, depth=1, transient_local=True)
"""For configuration topics (impedance parameters): late subscribers get the last value."""


class Publisher(Protocol[M_contra]):
    """Publishes one message type on one topic."""

    def publish(self, msg: M_contra) -> None:
        """Send ``msg`` (an instance of the publisher's message class)."""
        ...

    def matched_count(self) -> int:
        """Number of subscriptions currently matched (discovery is asynchronous)."""
        ...


class Subscription(Protocol):
    """A live subscription; ``close()`` stops callbacks."""

    def matched_count(self) -> int:
        """Number of publishers currently matched."""
        ...

    def close(self) -> None:
        """Stop delivering messages to the callback."""
        ...


class Transport(Protocol):
    """Creates publishers and subscriptions on ROS 2 topics (``/name``, no ``rt/``)."""

    def publisher(self, topic: str, msg_type: type[M], qos: QoS = DEFAULT_QOS) -> Publisher[M]:
        """Publisher of ``msg_type`` (a :mod:`hardware.ros2.messages` class) on ``topic``."""
        ...

    def subscribe(
        self,
        topic: str,
        msg_type: type[M],
        callback: Callable[[M], None],
        qos: QoS = DEFAULT_QOS,
    ) -> Subscription:
        """Call ``callback(msg)`` on the receive thread for every message on ``topic``."""
        ...

    def close(self) -> None:
        """Release all endpoints; the transport cannot be used afterwards."""
        ...

    def __enter__(self) -> Transport: ...

    def __exit__(self, *exc: object) -> None: ...


def dds_topic_name(topic: str) -> str:
    """ROS topic -> DDS topic: ``/joint_states`` -> ``rt/joint_states`` (absolute names only)."""
    if not topic.startswith("/") or topic.endswith("/") or "//" in topic:
        raise TransportError(
            f"expected an absolute ROS topic name like '/joint_states', got {topic!r}"
        )
    return "rt" + topic


def domain_id_from_env() -> int:
    """``ROS_DOMAIN_ID`` (0 when unset); raises on a value outside 0..232."""
    raw = os.environ.get("ROS_DOMAIN_ID", "0").strip() or "0"
    try:
        value = int(raw)
    except ValueError as exc:
        raise TransportError(f"expected an integer ROS_DOMAIN_ID, got {raw!r}") from exc
    if not 0 <= value <= 232:
        raise TransportError(f"expected ROS_DOMAIN_ID in 0..232, got {value}")
    return value
