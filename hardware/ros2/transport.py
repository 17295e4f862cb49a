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

import atexit
import gc
import importlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from cyclonedds.idl import IdlStruct

from hardware.ros2.messages import ros_type_name, type_hash

log = logging.getLogger(__name__)

M = TypeVar("M", bound=IdlStruct)


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


class Publisher(Protocol[M]):
    """Publishes one message type on one topic."""

    def publish(self, msg: M) -> None:
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


def loopback_config(max_participants: int = 32) -> str:
    """A ``CYCLONEDDS_URI`` value that keeps all traffic on 127.0.0.1 (unicast discovery).

    The loopback interface has no multicast here, so discovery goes to the unicast ports of
    participant indices 0..``max_participants`` on localhost. Set it in the environment before
    the first participant of a process is created (tests, the end-to-end demo, benchmarks).
    """
    return (
        "<CycloneDDS><Domain id='any'><General><Interfaces>"
        "<NetworkInterface name='lo'/></Interfaces><AllowMulticast>false</AllowMulticast>"
        "</General><Discovery><Peers><Peer address='127.0.0.1'/></Peers>"
        "<ParticipantIndex>auto</ParticipantIndex>"
        f"<MaxAutoParticipantIndex>{max_participants}</MaxAutoParticipantIndex>"
        "</Discovery></Domain></CycloneDDS>"
    )


# --- Cyclone DDS ---------------------------------------------------------------------------------


def _cyclone_qos(qos: QoS, msg_type: type[IdlStruct], writer: bool) -> Any:
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.util import duration

    if writer and not qos.reliable:
        raise TransportError("expected a RELIABLE writer (ROS subscribers default to reliable)")
    reliability = (
        Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100))
        if qos.reliable
        else Policy.Reliability.BestEffort
    )
    durability = (
        Policy.Durability.TransientLocal if qos.transient_local else Policy.Durability.Volatile
    )
    return Qos(
        reliability,
        durability,
        Policy.History.KeepLast(qos.depth),
        Policy.DataRepresentation(use_cdrv0_representation=True),  # XCDR1, as rmw_cyclonedds
        Policy.Userdata(data=f"typehash={type_hash(msg_type)};".encode()),
    )


class _CyclonePublisher:
    def __init__(self, writer: Any, msg_type: type[IdlStruct]) -> None:
        self._writer = writer
        self._type = msg_type

    def publish(self, msg: IdlStruct) -> None:
        if type(msg) is not self._type:
            raise TypeError(f"expected {self._type.__name__}, got {type(msg).__name__}")
        self._writer.write(msg)

    def matched_count(self) -> int:
        return len(self._writer.get_matched_subscriptions())


class _Flag:
    __slots__ = ("closed",)

    def __init__(self) -> None:
        self.closed = False


class _CycloneSubscription:
    def __init__(self, reader: Any, flag: _Flag) -> None:
        self._reader = reader
        self._flag = flag

    @property
    def closed(self) -> bool:
        return self._flag.closed

    def matched_count(self) -> int:
        return len(self._reader.get_matched_publications())

    def close(self) -> None:
        if not self._flag.closed:
            self._flag.closed = True
            self._reader.set_listener(None)


class CycloneTransport:
    """:class:`Transport` over Cyclone DDS, wire-compatible with ROS 2 (rmw_cyclonedds).

    Args:
        domain_id: DDS domain; ``None`` reads ``ROS_DOMAIN_ID``.
        node_name: participant name (shows up in DDS tools; ROS graph tools do not list it).
    """

    def __init__(self, domain_id: int | None = None, node_name: str = "robotrl") -> None:
        from cyclonedds.domain import DomainParticipant
        from cyclonedds.pub import Publisher as DdsPublisher
        from cyclonedds.qos import Policy, Qos
        from cyclonedds.sub import Subscriber as DdsSubscriber

        self.domain_id = domain_id_from_env() if domain_id is None else int(domain_id)
        if not 0 <= self.domain_id <= 232:
            raise TransportError(f"expected domain_id in 0..232, got {self.domain_id}")
        self.node_name = node_name
        self._dp = DomainParticipant(self.domain_id, qos=Qos(Policy.EntityName(node_name)))
        self._pub = DdsPublisher(self._dp)
        self._sub = DdsSubscriber(self._dp)
        self._topics: dict[str, Any] = {}
        self._entities: list[Any] = []
        self._subs: list[_CycloneSubscription] = []
        self._lock = threading.Lock()
        self._closed = False
        # Interpreter exit with live listeners deadlocks in Cyclone's finaliser: close first.
        atexit.register(self.close)

    def _topic(self, topic: str, msg_type: type[IdlStruct]) -> Any:
        from cyclonedds.topic import Topic

        name = dds_topic_name(topic)
        with self._lock:
            if self._closed:
                raise TransportError("transport is closed")
            existing = self._topics.get(name)
            if existing is not None:
                if existing.data_type is not msg_type:
                    raise TransportError(
                        f"topic {topic} already has type {existing.data_type.__name__}, "
                        f"got {msg_type.__name__}"
                    )
                return existing
            self._topics[name] = Topic(self._dp, name, msg_type)
            return self._topics[name]

    def publisher(self, topic: str, msg_type: type[M], qos: QoS = DEFAULT_QOS) -> _CyclonePublisher:
        from cyclonedds.pub import DataWriter

        writer = DataWriter(
            self._pub, self._topic(topic, msg_type), qos=_cyclone_qos(qos, msg_type, True)
        )
        self._entities.append(writer)
        return _CyclonePublisher(writer, msg_type)

    def subscribe(
        self,
        topic: str,
        msg_type: type[M],
        callback: Callable[[M], None],
        qos: QoS = DEFAULT_QOS,
    ) -> _CycloneSubscription:
        from cyclonedds.core import Listener
        from cyclonedds.sub import DataReader

        # The listener closure holds only this flag, never the reader or the subscription: no
        # reference cycle, so closing deletes the DDS entities right away in the closing thread.
        # Cyclic garbage collected later inside a listener callback runs dds_delete from the
        # receive thread, which deadlocks against a concurrent set_listener (seen in tests).
        flag = _Flag()

        def on_data(reader: Any) -> None:
            if reader is None:  # the reader was deleted while a notification was in flight
                return
            for msg in reader.take(N=64):
                if flag.closed:
                    return
                if not isinstance(msg, msg_type):  # InvalidSample: a writer left, no data
                    continue
                try:
                    callback(msg)
                except Exception:  # a bad callback must not kill the receive thread
                    log.exception("callback for %s raised", topic)

        reader = DataReader(
            self._sub,
            self._topic(topic, msg_type),
            qos=_cyclone_qos(qos, msg_type, False),
            listener=Listener(on_data_available=on_data),
        )
        sub = _CycloneSubscription(reader, flag)
        # Samples that arrived while the reader was being built (latched history) fired the
        # listener before the Python entity existed; take them now.
        on_data(reader)
        self._entities.append(reader)
        self._subs.append(sub)
        return sub

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for sub in self._subs:
            sub.close()
        self._entities.clear()
        self._topics.clear()
        self._dp = self._pub = self._sub = None
        atexit.unregister(self.close)
        gc.collect()  # delete what is left of the entities here, not in a receive thread

    def __enter__(self) -> CycloneTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- rclpy ---------------------------------------------------------------------------------------


def _rclpy_type(msg_type: type[IdlStruct]) -> Any:
    pkg, _, name = ros_type_name(msg_type).split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)


class RclpyTransport:
    """:class:`Transport` over rclpy (needs a sourced ROS 2 install).

    Publishes ``msg.serialize()`` bytes and deserialises raw CDR from ``raw=True`` subscriptions
    into the same message classes, relying on their byte-for-byte equality with ROS' CDR. An
    executor thread spins the node.
    """

    def __init__(self, domain_id: int | None = None, node_name: str = "robotrl") -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self._rclpy = rclpy
        self._context = rclpy.Context()
        kwargs = {} if domain_id is None else {"domain_id": int(domain_id)}
        rclpy.init(context=self._context, **kwargs)
        self._node = rclpy.create_node(node_name, context=self._context)
        self._executor = SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self._node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def _qos(self, qos: QoS) -> Any:
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        return QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=qos.depth,
            reliability=ReliabilityPolicy.RELIABLE
            if qos.reliable
            else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL
            if qos.transient_local
            else DurabilityPolicy.VOLATILE,
        )

    def publisher(self, topic: str, msg_type: type[M], qos: QoS = DEFAULT_QOS) -> Any:
        dds_topic_name(topic)  # same validation as Cyclone
        pub = self._node.create_publisher(_rclpy_type(msg_type), topic, self._qos(qos))

        class _Pub:
            def publish(self, msg: IdlStruct) -> None:
                if type(msg) is not msg_type:
                    raise TypeError(f"expected {msg_type.__name__}, got {type(msg).__name__}")
                pub.publish(msg.serialize())

            def matched_count(self) -> int:
                return int(pub.get_subscription_count())

        return _Pub()

    def subscribe(
        self,
        topic: str,
        msg_type: type[M],
        callback: Callable[[M], None],
        qos: QoS = DEFAULT_QOS,
    ) -> Any:
        dds_topic_name(topic)
        node = self._node

        def on_raw(raw: bytes) -> None:
            try:
                callback(msg_type.deserialize(raw))
            except Exception:
                log.exception("callback for %s raised", topic)

        sub = node.create_subscription(
            _rclpy_type(msg_type), topic, on_raw, self._qos(qos), raw=True
        )

        class _Sub:
            def matched_count(self) -> int:
                return int(sub.get_publisher_count())

            def close(self) -> None:
                node.destroy_subscription(sub)

        return _Sub()

    def close(self) -> None:
        self._executor.shutdown()
        self._node.destroy_node()
        self._rclpy.shutdown(context=self._context)

    def __enter__(self) -> RclpyTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
