"""Cyclone DDS (PyPI ``cyclonedds``, no ROS install) behind the
:class:`~hardware.ros2.endpoint.Transport` interface, wire-compatible with ROS 2 nodes
(rmw_cyclonedds): topic ``/joint_states`` is DDS topic ``rt/joint_states``; types are the
:mod:`hardware.ros2.messages` structs (``sensor_msgs::msg::dds_::JointState_``, ``@final``,
XCDR1); endpoint USER_DATA carries ``typehash=RIHS01_<hex>;`` (Iron/Jazzy check it); the domain
id is ``ROS_DOMAIN_ID`` (default 0).

Callbacks run on Cyclone's listener thread: keep them short (copy into a buffer, set an event)
and thread-safe.
"""

from __future__ import annotations

import atexit
import gc
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cyclonedds.idl import IdlStruct

from hardware.ros2.endpoint import (
    DEFAULT_QOS,
    M,
    QoS,
    TransportError,
    dds_topic_name,
    domain_id_from_env,
)
from hardware.ros2.messages import type_hash

if TYPE_CHECKING:
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.pub import Publisher as DdsPublisher
    from cyclonedds.sub import Subscriber as DdsSubscriber

log = logging.getLogger(__name__)

_E = TypeVar("_E")


def _live(entity: _E | None) -> _E:
    """``entity`` (a participant, publisher or subscriber); close() sets them to None."""
    if entity is None:
        raise TransportError("transport is closed")
    return entity


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
        dp = DomainParticipant(self.domain_id, qos=Qos(Policy.EntityName(node_name)))
        self._dp: DomainParticipant | None = dp
        self._pub: DdsPublisher | None = DdsPublisher(dp)
        self._sub: DdsSubscriber | None = DdsSubscriber(dp)
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
            self._topics[name] = Topic(_live(self._dp), name, msg_type)
            return self._topics[name]

    def publisher(self, topic: str, msg_type: type[M], qos: QoS = DEFAULT_QOS) -> _CyclonePublisher:
        from cyclonedds.pub import DataWriter

        writer = DataWriter(
            _live(self._pub), self._topic(topic, msg_type), qos=_cyclone_qos(qos, msg_type, True)
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
            _live(self._sub),
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
