"""Simulation: the MuJoCo Panda, manipulation tasks, scripted experts and vector envs.

``sim.make(task, **kw)`` and ``sim.make_vec(task, num_envs, **kw)`` build Gymnasium envs from
the plain dict registry :data:`sim.registry.TASKS`. The registry is imported on first use so
that ``import sim.arm`` stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EXPERTS", "TASKS", "make", "make_expert", "make_vec"]


def make(task: str, **kwargs: Any) -> Any:
    """See :func:`sim.registry.make`."""
    from sim.registry import make as _make

    return _make(task, **kwargs)


def make_vec(task: str, num_envs: int, **kwargs: Any) -> Any:
    """See :func:`sim.registry.make_vec`."""
    from sim.registry import make_vec as _make_vec

    return _make_vec(task, num_envs, **kwargs)


def make_expert(task: str, env: Any = None, **kwargs: Any) -> Any:
    """See :func:`sim.registry.make_expert`."""
    from sim.registry import make_expert as _make_expert

    return _make_expert(task, env, **kwargs)


def __getattr__(name: str) -> Any:
    if name in ("TASKS", "EXPERTS"):
        from sim import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
