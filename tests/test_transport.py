"""make_transport: the registry of transports and the choice of one."""

from __future__ import annotations

import os
import random

import pytest

pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")

from hardware.ros2.transport import (
    TRANSPORTS,
    CycloneTransport,
    RclpyTransport,
    TransportError,
    loopback_config,
    make_transport,
    rclpy_available,
)

pytestmark = pytest.mark.ros2

os.environ.setdefault("CYCLONEDDS_URI", loopback_config())


def test_make_transport_kinds() -> None:
    assert TRANSPORTS == {"cyclonedds": CycloneTransport, "rclpy": RclpyTransport}
    with pytest.raises(TransportError, match="transport kind"):
        make_transport("zenoh")
    domain = random.randint(1, 230)
    with make_transport("cyclonedds", domain_id=domain, node_name="picked") as tr:
        assert isinstance(tr, CycloneTransport)
        assert (tr.domain_id, tr.node_name) == (domain, "picked")
    if not rclpy_available():  # "auto" = rclpy only with a sourced ROS 2
        with make_transport(domain_id=domain) as tr:
            assert isinstance(tr, CycloneTransport) and tr.node_name == "robotrl"
