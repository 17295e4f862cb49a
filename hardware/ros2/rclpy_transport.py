"""rclpy (a sourced ROS 2 install) behind the :class:`~hardware.ros2.endpoint.Transport`
interface: an rclpy node that publishes and receives the same CDR bytes as
:mod:`hardware.ros2.cyclone_transport` (``raw=True`` subscriptions, serialised publishes), so
callers use the same :mod:`hardware.ros2.messages` classes with either transport. rclpy is not
installable on the dev machines; this module is kept small and is exercised only on robots.

Callbacks run on the executor thread: keep them short and thread-safe.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from cyclonedds.idl import IdlStruct

from hardware.ros2.endpoint import DEFAULT_QOS, M, QoS, dds_topic_name
from hardware.ros2.messages import ros_type_name

log = logging.getLogger(__name__)


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
