"""A node's process: config and name from its command line, a transport on its domain, SIGTERM
stops the node, Ctrl-C keeps the stats so far, the node is closed and one JSON line printed."""

from __future__ import annotations

import json
import signal
import sys
import types
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from hardware.ros2.node_params import ConfigError, NodeConfig
from hardware.ros2.node_process import run_node_process


@dataclass
class EchoConfig(NodeConfig):
    NODE_NAME: ClassVar[str] = "echo"
    ticks: int = 2
    out: str = "x.zarr"


@dataclass
class EchoStats:
    ticks: int = 0
    stopped_by: str = ""


@dataclass
class EchoNode:
    cfg: EchoConfig
    transport: Any
    interrupt: bool = False
    stats: EchoStats = field(default_factory=EchoStats)
    calls: list[str] = field(default_factory=list)

    def run(self) -> EchoStats:
        self.calls.append("run")
        self.stats.ticks = self.cfg.ticks
        if self.interrupt:
            raise KeyboardInterrupt
        self.stats.stopped_by = "done"
        return self.stats

    def stop(self) -> None:
        self.calls.append("stop")

    def close(self) -> None:
        self.calls.append("close")


@pytest.fixture
def opened(monkeypatch):
    """The transports the process opened (a fake ``make_transport``), and SIGTERM's handler."""
    seen: dict[str, Any] = {"transports": []}

    class FakeTransport:
        def __init__(self, domain_id: int | None, node_name: str) -> None:
            self.domain_id, self.node_name, self.closed = domain_id, node_name, False
            seen["transports"].append(self)

        def __enter__(self) -> FakeTransport:
            return self

        def __exit__(self, *exc: object) -> None:
            self.closed = True

    fake = types.ModuleType("hardware.ros2.transport")
    fake.make_transport = FakeTransport  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hardware.ros2.transport", fake)
    monkeypatch.setattr(signal, "signal", lambda sig, handler: seen.__setitem__(sig, handler))
    return seen


def test_runs_the_node_on_its_domain_and_prints_its_stats(opened, capsys):
    nodes: list[EchoNode] = []

    def make(cfg: EchoConfig, transport: Any) -> EchoNode:
        nodes.append(EchoNode(cfg, transport))
        return nodes[-1]

    argv = ["ticks:=5", "--ros-args", "-p", "domain_id:=3", "-r", "__node:=echo_1"]
    rc = run_node_process(EchoConfig, make, argv, extra=lambda cfg: {"out": cfg.out})
    assert rc == 0
    (transport,) = opened["transports"]
    assert (transport.domain_id, transport.node_name, transport.closed) == (3, "echo_1", True)
    assert nodes[0].transport is transport
    assert nodes[0].calls == ["run", "close"]
    out = json.loads(capsys.readouterr().out)
    assert out == {"node": "echo_1", "out": "x.zarr", "ticks": 5, "stopped_by": "done"}


def test_default_domain_reads_ros_domain_id(opened, capsys):
    run_node_process(EchoConfig, EchoNode, [])
    assert opened["transports"][0].domain_id is None  # the transport reads ROS_DOMAIN_ID
    assert json.loads(capsys.readouterr().out)["node"] == "echo"


def test_sigterm_stops_the_node(opened, capsys):
    nodes: list[EchoNode] = []

    def make(cfg: EchoConfig, transport: Any) -> EchoNode:
        nodes.append(EchoNode(cfg, transport))
        return nodes[-1]

    run_node_process(EchoConfig, make, [])
    opened[signal.SIGTERM](signal.SIGTERM, None)
    assert nodes[0].calls == ["run", "close", "stop"]


def test_ctrl_c_keeps_the_stats_so_far_and_closes_the_node(opened, capsys):
    nodes: list[EchoNode] = []

    def make(cfg: EchoConfig, transport: Any) -> EchoNode:
        nodes.append(EchoNode(cfg, transport, interrupt=True))
        return nodes[-1]

    assert run_node_process(EchoConfig, make, ["ticks:=4"], summary=vars) == 0
    assert nodes[0].calls == ["run", "close"]
    assert json.loads(capsys.readouterr().out) == {
        "node": "echo",
        "ticks": 4,
        "stopped_by": "interrupt",
    }


def test_bad_arguments_fail_before_any_transport_opens(opened):
    with pytest.raises(ConfigError, match="unknown parameters"):
        run_node_process(EchoConfig, EchoNode, ["tick:=4"])
    assert opened["transports"] == []
