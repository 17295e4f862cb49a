"""Env rollouts on Ray workers: each worker is a Ray actor (its own process, on this machine or
anywhere in a Ray cluster) owning a few envs; the trainer keeps the policy and steps all
workers' envs at once.

:class:`RayVectorEnv` is a Gymnasium vector env with autoreset disabled -- the contract of
``sim.make_vec(..., autoreset_mode=DISABLED)`` -- so a chunk-level trainer (flow-PG's
``FlowRollout``) takes it unchanged. The residual trainer's
:class:`~robotrl.algos.residual_rollout.ResidualRollout` uses its per-env view
(:meth:`RayVectorEnv.step_each`, :meth:`RayVectorEnv.reset_one`).

By default Ray starts locally (``ray.init(num_cpus=..., include_dashboard=False)``); pass
``address="ray://host:10001"`` or ``"auto"`` to join a cluster, whose workers must be able to
import ``robotrl`` and ``sim`` and build the env from the pickled factory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

# (obs, reward, terminated, truncated, info) of one env
StepResult = tuple[Any, ...]


def init_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Start (or join) Ray once per process: local with ``num_cpus`` when ``address`` is None,
    else connect to the cluster at ``address``. No dashboard, no usage stats."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)


class RolloutWorker:
    """``num_envs`` envs built by ``env_fn`` inside one worker process (a Ray actor).

    Plain class, usable without Ray (tests, debugging); :class:`RayVectorEnv` wraps it with
    ``ray.remote``. Torch, if the env uses it, runs one thread: workers share the cores.
    """

    def __init__(self, env_fn: Callable[[], gym.Env], num_envs: int) -> None:
        os.environ["OMP_NUM_THREADS"] = "1"
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.envs = [env_fn() for _ in range(num_envs)]

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        """(observation space, action space) of one env."""
        return self.envs[0].observation_space, self.envs[0].action_space

    def attributes(self, names: Sequence[str]) -> dict[str, Any]:
        """Plain attributes of the first env (``max_dpos``, ``control_hz``...) that exist."""
        return {n: getattr(self.envs[0], n) for n in names if hasattr(self.envs[0], n)}

    def reset(
        self, seeds: Sequence[int | None], mask: Sequence[bool]
    ) -> list[tuple[dict[str, np.ndarray], dict[str, Any]] | None]:
        """Reset the envs where ``mask`` is set (seed per env); None for the others."""
        return [
            env.reset(seed=s) if m else None
            for env, s, m in zip(self.envs, seeds, mask, strict=True)
        ]

    def step(self, actions: np.ndarray) -> list[StepResult]:
        """Step every env with its row of ``actions`` (num_envs, Da); no autoreset."""
        return [env.step(a) for env, a in zip(self.envs, actions, strict=True)]

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _stack_infos(infos: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Per-env info dicts -> {key: (N,) array, "_key": (N,) presence mask} (Gymnasium's layout);
    only scalar entries (``success``, ``intervention``...) are stacked."""
    keys = {k for info in infos for k, v in info.items() if np.ndim(v) == 0}
    out: dict[str, np.ndarray] = {}
    for k in sorted(keys):
        present = np.array([k in info for info in infos])
        values = [info.get(k, False) for info in infos]
        out[k] = np.asarray(values)
        out[f"_{k}"] = present
    return out


class RayVectorEnv(gym.vector.VectorEnv):
    """``num_workers * envs_per_worker`` envs on Ray workers, autoreset disabled.

    Args:
        env_fn: picklable factory of one env (cloudpickle: closures and lambdas are fine).
        num_workers: Ray actors (processes); each reserves ``cpus_per_worker`` CPUs.
        envs_per_worker: envs stepped one after the other inside each worker.
        address: Ray cluster address; None starts Ray locally.
        num_cpus: CPUs of the local Ray instance (default ``num_workers * cpus_per_worker``).
        cpus_per_worker: Ray CPU reservation per worker.

    Env ``i`` lives on worker ``i // envs_per_worker``. ``reset(seed=s)`` seeds env i with
    ``s + i`` (Gymnasium's convention) or takes a list of seeds; ``options={"reset_mask": m}``
    resets only the masked envs (the others keep their last observation).
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
    ) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if envs_per_worker < 1:
            raise ValueError(f"envs_per_worker must be >= 1, got {envs_per_worker}")
        import ray

        init_ray(address, num_cpus or max(1, int(np.ceil(num_workers * cpus_per_worker))))
        self._ray = ray
        remote: Any = ray.remote(num_cpus=cpus_per_worker)(RolloutWorker)
        self.workers: list[Any] = [
            remote.remote(env_fn, envs_per_worker) for _ in range(num_workers)
        ]
        self.per_worker = envs_per_worker
        self.num_envs = num_workers * envs_per_worker
        obs_space, act_space = ray.get(self.workers[0].spaces.remote())
        self.single_observation_space = obs_space
        self.single_action_space = act_space
        self.observation_space = gym.vector.utils.batch_space(obs_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(act_space, self.num_envs)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.DISABLED}
        self._obs: list[dict[str, np.ndarray]] = []
        self._pending: list[Any] | None = None
        self._closed = False

    # ----------------------------------------------------------------- per-env view
    def env_attributes(self, names: Sequence[str]) -> dict[str, Any]:
        """Attributes of one env (the same for all): e.g. ``["max_dpos", "max_drot"]``."""
        attrs: dict[str, Any] = self._ray.get(self.workers[0].attributes.remote(list(names)))
        return attrs

    def reset_each(
        self, seeds: Sequence[int | None], mask: Sequence[bool] | None = None
    ) -> list[tuple[dict[str, np.ndarray], dict[str, Any]] | None]:
        """Reset the masked envs (all when None), in parallel over workers; per-env results."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"need {self.num_envs} seeds, got {len(seeds)}")
        mask = [True] * self.num_envs if mask is None else [bool(m) for m in mask]
        k = self.per_worker
        refs = [
            w.reset.remote(list(seeds[j * k : (j + 1) * k]), mask[j * k : (j + 1) * k])
            for j, w in enumerate(self.workers)
        ]
        out = [r for chunk in self._ray.get(refs) for r in chunk]
        if not self._obs:
            self._obs = [None] * self.num_envs  # type: ignore[list-item]
        for i, r in enumerate(out):
            if r is not None:
                self._obs[i] = r[0]
        return out

    def reset_one(self, i: int, seed: int | None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset env ``i`` only (the residual rollout resets finished episodes one by one)."""
        mask = [j == i for j in range(self.num_envs)]
        result = self.reset_each([seed] * self.num_envs, mask)[i]
        if result is None:
            raise RuntimeError(f"worker did not reset env {i}")
        return result

    def step_each(self, actions: np.ndarray) -> list[StepResult]:
        """Step all envs with ``actions`` (N, Da), workers in parallel; per-env results."""
        self.step_async(actions)
        return self._wait_each()

    def step_async(self, actions: np.ndarray) -> None:
        """Send ``actions`` (N, Da) to the workers without waiting."""
        a = np.asarray(actions)
        if a.shape[0] != self.num_envs:
            raise ValueError(f"actions must have {self.num_envs} rows, got shape {a.shape}")
        k = self.per_worker
        self._pending = [w.step.remote(a[j * k : (j + 1) * k]) for j, w in enumerate(self.workers)]

    def _wait_each(self) -> list[StepResult]:
        if self._pending is None:
            raise RuntimeError("step_async() was not called")
        out = [r for chunk in self._ray.get(self._pending) for r in chunk]
        self._pending = None
        for i, r in enumerate(out):
            self._obs[i] = r[0]
        return out

    # ----------------------------------------------------------------- vector API
    def _batch(self, obs: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        return {k: np.stack([o[k] for o in obs]) for k in obs[0]}

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if seed is None or isinstance(seed, int | np.integer):
            seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        mask = (options or {}).get("reset_mask")
        results = self.reset_each(seeds, None if mask is None else list(mask))
        infos = [r[1] if r is not None else {} for r in results]
        return self._batch(self._obs), _stack_infos(infos)

    def step_wait(self, **kwargs: Any) -> tuple[Any, ...]:
        out = self._wait_each()
        rewards = np.array([r[1] for r in out], dtype=np.float64)
        term = np.array([r[2] for r in out], dtype=bool)
        trunc = np.array([r[3] for r in out], dtype=bool)
        return self._batch(self._obs), rewards, term, trunc, _stack_infos([r[4] for r in out])

    def step(self, actions: np.ndarray) -> tuple[Any, ...]:
        self.step_async(actions)
        return self.step_wait()

    def close(self, **kwargs: Any) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._ray.get([w.close.remote() for w in self.workers], timeout=30)
        finally:
            for w in self.workers:
                self._ray.kill(w)
