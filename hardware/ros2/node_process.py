"""A node as its own process: what every node's console script does around the node itself.

:func:`run_node_process` reads the node's typed config and name from a ROS 2 command line
(:meth:`~hardware.ros2.node_params.NodeConfig.from_args`), opens a transport on the config's
DDS domain, builds the node, lets ``SIGTERM`` (``ros2 launch`` shutting down) stop it, ends
on Ctrl-C with the stats gathered so far, closes the node and prints one JSON line of stats
on stdout, which launch files and tests read.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hardware.ros2.node_params import NodeConfig

if TYPE_CHECKING:
    from hardware.ros2.endpoint import Transport

C = TypeVar("C", bound=NodeConfig)


class ProcessNode(Protocol):
    """What :func:`run_node_process` needs of a node."""

    @property
    def stats(self) -> Any:
        """The node's stats so far (a dataclass; ``stopped_by`` is set on Ctrl-C if it has one)."""
        ...

    def run(self) -> Any:
        """Serve until done or stopped; the final stats."""
        ...

    def stop(self) -> None:
        """Make :meth:`run` return soon (called from the SIGTERM handler)."""
        ...

    def close(self) -> None:
        """Release what the node holds (env, store, subscriptions) after :meth:`run`."""
        ...


def run_node_process(
    config_cls: type[C],
    make_node: Callable[[C, Transport], ProcessNode],
    argv: Sequence[str] | None = None,
    summary: Callable[[Any], dict[str, Any]] = vars,
    extra: Callable[[C], dict[str, Any]] | None = None,
) -> int:
    """Run one node as the process's whole work; 0 once it has stopped.

    Args:
        config_cls: the node's config (a :class:`NodeConfig`); bad arguments -> ConfigError.
        make_node: builds the node from its config and the open transport.
        argv: the command line after the program name (None: ``sys.argv[1:]``).
        summary: the stats as a JSON-able dict (default: their fields).
        extra: entries from the config printed before the stats (e.g. the store's path).
    """
    from hardware.ros2.transport import make_transport  # lazy: cyclonedds (the 'ros2' extra)

    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    cfg, name = config_cls.from_args(sys.argv[1:] if argv is None else argv)
    domain = None if cfg.domain_id < 0 else cfg.domain_id
    with make_transport(domain_id=domain, node_name=name) as transport:
        node = make_node(cfg, transport)
        signal.signal(signal.SIGTERM, lambda *_: node.stop())
        try:
            stats = node.run()
        except KeyboardInterrupt:
            stats = node.stats
            if hasattr(stats, "stopped_by"):
                stats.stopped_by = "interrupt"
        finally:
            node.close()
    head = {"node": name, **(extra(cfg) if extra else {})}
    print(json.dumps({**head, **summary(stats)}), flush=True)
    return 0
