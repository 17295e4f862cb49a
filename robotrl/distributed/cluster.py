"""Joining the Ray cluster the actor/learner split runs on.

A learner and its actors find each other by name inside one Ray cluster and namespace: the
learner process creates the named learner actor, every actor process looks it up. Two machines
(robot PC + GPU box) form a cluster the usual way::

    gpu-box$  export RAY_AUTH_MODE=token; ray start --head --port=6379   # writes ~/.ray/auth_token
    robot-pc$ export RAY_AUTH_MODE=token                                 # + that token, copied
    robot-pc$ ray start --address=<gpu-box>:6379

and both processes (with ``RAY_AUTH_MODE=token`` in their environment) pass
``ray.address=auto``. With no address, the learner process starts a local Ray instance of its
own and prints its address for the actors (``role=split`` does this).
"""

from __future__ import annotations

import os
import sys
from typing import Any

NAMESPACE = "robotrl"


def connect(address: str | None, num_cpus: int | None = None) -> str:
    """Join the cluster at ``address`` ("auto", "host:port"; None: start a local instance of
    ``num_cpus`` CPUs, default all) unless this process already has; returns the cluster's GCS
    address (``host:port``). No dashboard, no usage statistics.

    Raises ConnectionError with the address when no cluster answers there.
    """
    # Clusters made by `ray start` want the token it wrote to ~/.ray/auth_token. Ray reads this
    # setting when it is first imported (and the processes it starts inherit it), so it is set
    # only in a process that has not imported ray yet; one that has keeps what it read.
    if "ray" not in sys.modules:
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray  # optional extra: dist

    if not ray.is_initialized():
        kwargs: dict[str, Any] = {
            "namespace": NAMESPACE,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if address is None:
            kwargs.update(include_dashboard=False, num_cpus=num_cpus or os.cpu_count() or 1)
        try:
            ray.init(address=address, **kwargs)
        except ConnectionError as e:
            hint = (
                ""
                if os.environ.get("RAY_AUTH_MODE")
                else " (a `ray start` cluster wants RAY_AUTH_MODE=token in the environment)"
            )
            raise ConnectionError(f"no Ray cluster answers at {address!r}: {e}{hint}") from None
    return str(ray.get_runtime_context().gcs_address)
