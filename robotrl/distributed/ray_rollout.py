"""Env rollouts on Ray workers: ``sim.make_vec``'s vector env with its slices in Ray actors.

:class:`RayVectorEnv` is a :class:`sim.vector_env.SlicedVectorEnv` whose every slice lives in a
Ray actor (its own process, on this machine or anywhere in a Ray cluster) running the same
:class:`sim.vector_env.EnvSlice`; the trainer keeps the policy and steps all workers' envs at
once. Autoreset is disabled by default -- the contract of
``sim.make_vec(..., autoreset_mode=DISABLED)`` -- so a chunk-level trainer (flow-PG's
``FlowRollout``) takes it unchanged; the residual trainer's
:class:`~robotrl.algos.residual_rollout.ResidualRollout` uses its per-env view
(:meth:`~sim.vector_env.SlicedVectorEnv.step_each`,
:meth:`~sim.vector_env.SlicedVectorEnv.reset_one`).

By default Ray starts locally (``ray.init(num_cpus=..., include_dashboard=False)``); pass
``address="ray://host:10001"`` or ``"auto"`` to join a cluster, whose workers must be able to
import ``robotrl`` and ``sim`` and build the env from the pickled factory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from robotrl.distributed.cluster import connect
from sim.vector_env import EnvSlice, SlicedVectorEnv

if TYPE_CHECKING:
    from ray import ObjectRef


class RaySlice:
    """A slice in a Ray actor (an :class:`~sim.vector_env.EnvSlice` with one torch/BLAS
    thread: workers share the cores)."""

    def __init__(self, env_fn: Callable[[], gym.Env], num_envs: int, index: int, cpus: float):
        import ray

        self._ray, self.index = ray, index
        self._ref: ObjectRef[Any] | None = None  # the submitted command's result
        remote: Any = ray.remote(num_cpus=cpus, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})(
            EnvSlice
        )
        self.actor = remote.remote([env_fn] * num_envs)

    def submit(self, cmd: str, args: tuple) -> None:
        self._ref = getattr(self.actor, cmd).remote(*args)

    def result(self) -> Any:
        ref, self._ref = self._ref, None
        if ref is None:
            raise RuntimeError(f"vector env worker {self.index}: result() without a submit()")
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayActorError as exc:
            raise RuntimeError(f"vector env worker {self.index} (Ray actor) died") from exc
        except self._ray.exceptions.RayTaskError as exc:
            cause = exc.cause if exc.cause is not None else exc
            raise RuntimeError(
                f"vector env worker {self.index}: {type(cause).__name__}: {cause}"
            ) from exc

    def close(self) -> None:
        try:
            self._ray.get(self.actor.close.remote(), timeout=30)
        except Exception:  # a dead actor has nothing to close
            pass
        finally:
            self._ray.kill(self.actor)


class RayVectorEnv(SlicedVectorEnv):
    """``num_workers * envs_per_worker`` envs on Ray workers (autoreset disabled by default).

    Args:
        env_fn: picklable factory of one env (cloudpickle: closures and lambdas are fine).
        num_workers: Ray actors (processes); each reserves ``cpus_per_worker`` CPUs.
        envs_per_worker: envs stepped one after the other inside each worker.
        address: Ray cluster address; None starts Ray locally.
        num_cpus: CPUs of the local Ray instance (default ``num_workers * cpus_per_worker``).
        cpus_per_worker: Ray CPU reservation per worker.
        autoreset_mode: as :class:`~sim.vector_env.SlicedVectorEnv`.

    Env ``i`` lives on worker ``i // envs_per_worker`` (numbered from 1 in errors).
    """

    def __init__(
        self,
        env_fn: Callable[[], gym.Env],
        num_workers: int,
        envs_per_worker: int = 1,
        *,
        address: str | None = None,
        num_cpus: int | None = None,
        cpus_per_worker: float = 1.0,
        autoreset_mode: AutoresetMode = AutoresetMode.DISABLED,
    ) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if envs_per_worker < 1:
            raise ValueError(f"envs_per_worker must be >= 1, got {envs_per_worker}")
        connect(address, num_cpus or max(1, int(np.ceil(num_workers * cpus_per_worker))))
        k = envs_per_worker
        handles = [RaySlice(env_fn, k, j + 1, cpus_per_worker) for j in range(num_workers)]
        self.per_worker = k
        try:
            slices = [range(j * k, (j + 1) * k) for j in range(num_workers)]
            self._setup(handles, slices, autoreset_mode)
        except BaseException:
            for h in handles:
                h.close()
            raise
