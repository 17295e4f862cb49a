"""Plain dict registries of tasks and their scripted experts, and the env constructors."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from sim.env import PandaEnv
from sim.expert import ScriptedExpert
from sim.instructed_env import InstructedPandaEnv, InstructedTask
from sim.task import Task
from sim.tasks.lift import LiftExpert, LiftTask
from sim.tasks.peg_insert import PegInsertExpert, PegInsertTask
from sim.tasks.pick_color import PickColorExpert, PickColorTask
from sim.tasks.reach import ReachExpert, ReachTask
from sim.tasks.tabletop import (
    TabletopExpert,
    TabletopSeenTask,
    TabletopTask,
    TabletopUnseenTask,
)
from sim.vector_env import SlicedVectorEnv

TASKS: dict[str, type[Task]] = {
    "reach": ReachTask,
    "lift": LiftTask,
    "peg_insert": PegInsertTask,
    "pick_color": PickColorTask,
    "tabletop": TabletopTask,
    "tabletop_seen": TabletopSeenTask,
    "tabletop_unseen": TabletopUnseenTask,
}
EXPERTS: dict[str, type[ScriptedExpert]] = {
    "reach": ReachExpert,
    "lift": LiftExpert,
    "peg_insert": PegInsertExpert,
    "pick_color": PickColorExpert,
    "tabletop": TabletopExpert,
    "tabletop_seen": TabletopExpert,
    "tabletop_unseen": TabletopExpert,
}


def _task(name: str) -> Task:
    """The task ``name``; ``"<instructed task>:<family>[,<family>...]"`` draws only those
    instruction families (``"tabletop:place/blue"``: fine-tune on the weakest one)."""
    base, _, families = name.partition(":")
    if base not in TASKS:
        raise ValueError(f"unknown task {base!r}; available: {sorted(TASKS)}")
    if not families:
        return TASKS[base]()
    if not hasattr(TASKS[base], "families"):
        raise ValueError(f"task {base!r} has no instruction families to choose ({name!r})")
    return TASKS[base](families=tuple(f.strip() for f in families.split(",")))  # type: ignore[call-arg]


def task_horizon(task: str) -> int:
    """Env steps of an episode of a sim task before truncation (its ``max_episode_steps``)."""
    return int(_task(task).max_episode_steps)


def task_observation_sizes(task: str) -> dict[str, int]:
    """Task observation sizes of a sim task (``{"cube_pos": 3, ...}``), without building an env
    (a robot's perception publishes the same entries on ``task_state``)."""
    return dict(_task(task).observation_sizes())


def instruction_family(task: str, instruction: str) -> str:
    """The family of an instruction of ``task`` (``"lift/red"`` for ``tabletop``; the
    instruction itself for other instructed tasks; ``""`` for tasks without instructions)."""
    t = _task(task)
    return t.family_of(instruction) if isinstance(t, InstructedTask) else ""


# Other simulators: backend -> "module:function(task, **kw)", imported on use (their packages
# are optional extras).
BACKENDS: dict[str, str] = {
    "pybullet": "sim.pybullet_env:make_pybullet",
    "maniskill": "sim.maniskill_env:make_maniskill",
    "ros2": "robotrl.nodes.robot_backend:make_ros2",  # a robot (or robotrl-sim-robot) over ROS 2
}


def _backend_make(backend: str) -> Callable[..., gym.Env]:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; available: {sorted(['mujoco', *BACKENDS])}")
    module, fn = BACKENDS[backend].split(":")
    return getattr(importlib.import_module(module), fn)


def make(task: str, backend: str = "mujoco", **kwargs: Any) -> PandaEnv:
    """Build one env of ``task`` (see :class:`sim.env.PandaEnv` for keyword arguments); tasks
    with instructions get an :class:`~sim.instructed_env.InstructedPandaEnv`. ``backend``
    selects another simulator from :data:`BACKENDS` (same observation and action spaces)."""
    if backend != "mujoco":  # same API as PandaEnv (spaces, step/reset, action scales)
        env: Any = _backend_make(backend)(task, **kwargs)
        return env
    t = _task(task)
    if isinstance(t, InstructedTask):
        return InstructedPandaEnv(t, **kwargs)
    return PandaEnv(t, **kwargs)


def make_vec(
    task: str,
    num_envs: int,
    *,
    workers: int | None = None,
    autoreset_mode: gym.vector.AutoresetMode = gym.vector.AutoresetMode.NEXT_STEP,
    **kwargs: Any,
) -> SlicedVectorEnv:
    """``num_envs`` copies of ``task`` in ``workers`` slices (a
    :class:`sim.vector_env.SlicedVectorEnv`: the first slice in this process, each other in a
    worker process; default one slice per usable core, ``workers=1``: all in this process).

    ``autoreset_mode``: Gymnasium's (``DISABLED``: the caller resets finished envs itself, with
    ``reset(seed=[...], options={"reset_mask": mask})``, as chunk-level RL rollouts do).
    Seeds: ``reset(seed=s)`` seeds env i with ``s + i`` (Gymnasium's convention).
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if kwargs.get("backend", "mujoco") == "mujoco":
        _task(task)  # fail here, not in a worker process
    else:
        _backend_make(kwargs["backend"])
    fns: list[Callable[[], gym.Env]] = [lambda: make(task, **kwargs) for _ in range(num_envs)]
    return SlicedVectorEnv(fns, workers=workers, autoreset_mode=autoreset_mode)


def make_expert(task: str, env: PandaEnv | None = None, **kwargs: Any) -> ScriptedExpert:
    """The scripted expert of ``task``; action scales are taken from ``env`` when given."""
    task = task.partition(":")[0]  # the expert of a task reads every family's instructions
    if task not in EXPERTS:
        raise ValueError(f"no expert for task {task!r}; available: {sorted(EXPERTS)}")
    if env is not None:
        kwargs.setdefault("max_dpos", env.max_dpos)
        kwargs.setdefault("max_drot", env.max_drot)
    return EXPERTS[task](**kwargs)
