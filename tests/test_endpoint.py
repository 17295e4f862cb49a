"""Transport endpoints: ROS -> DDS topic names, the ROS domain id, QoS checks."""

from __future__ import annotations

import pytest

pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")

from hardware.ros2.endpoint import QoS, TransportError, dds_topic_name, domain_id_from_env

pytestmark = pytest.mark.ros2


def test_topic_names_and_domain_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert dds_topic_name("/joint_states") == "rt/joint_states"
    assert dds_topic_name("/fr3/equilibrium_pose") == "rt/fr3/equilibrium_pose"
    for bad in ("joint_states", "/a/", "/a//b"):
        with pytest.raises(TransportError, match="absolute ROS topic"):
            dds_topic_name(bad)
    monkeypatch.setenv("ROS_DOMAIN_ID", "42")
    assert domain_id_from_env() == 42
    monkeypatch.setenv("ROS_DOMAIN_ID", "300")
    with pytest.raises(TransportError, match=r"0\.\.232"):
        domain_id_from_env()
    monkeypatch.delenv("ROS_DOMAIN_ID")
    assert domain_id_from_env() == 0
    with pytest.raises(ValueError, match="depth"):
        QoS(depth=0)
