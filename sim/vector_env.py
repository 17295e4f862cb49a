"""N envs split into contiguous slices, one slice per worker; the vector env of ``sim.make_vec``.

Slice 0 is stepped in this process, the others each in a worker process, all at once; a
worker steps its envs one after the other and answers with one message per step holding its
slice's observations already stacked. With one worker per core the pipes cost one round trip
per slice instead of one per env (Gymnasium's ``AsyncVectorEnv`` runs one process per env and,
at ~1 ms per MuJoCo env step, spends more on pipes than it gains). A side that waits for the
other polls the pipe for a few milliseconds before it blocks: a blocked process gives up its
core, and on a virtual machine waking it again costs a good part of an env step. Threads do
not pay: an env step is ~30 % Python, and the GIL hand-offs cost more than the physics they
overlap (``docs/parallel_sim.md``).

The API is Gymnasium's ``VectorEnv`` (``NEXT_STEP`` or ``DISABLED`` autoreset; seeds: env i
gets ``seed + i``, or a list of seeds; ``options={"reset_mask": m}`` resets only the masked
envs) plus the per-env view of the residual trainer, shared with ``RayVectorEnv``:
:meth:`SlicedVectorEnv.step_each`, :meth:`~SlicedVectorEnv.reset_each`,
:meth:`~SlicedVectorEnv.reset_one` and :meth:`~SlicedVectorEnv.env_attributes`.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, NamedTuple, Protocol

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import create_empty_array

SPIN_S = 0.005  # seconds a waiting side polls its pipe before it blocks

# (obs, reward, terminated, truncated, info) of one env
StepResult = tuple[Any, ...]
ResetResult = tuple[dict[str, np.ndarray], dict[str, Any]]


def usable_cores() -> int:
    """Cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def reset_seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    """Per-env seeds of a vector ``reset(seed=...)``: ``seed + i`` for an int, a list as given."""
    if seed is None or isinstance(seed, int | np.integer):
        return [None if seed is None else int(seed) + i for i in range(n)]
    seeds = list(seed)
    if len(seeds) != n:
        raise ValueError(f"need {n} seeds, got {len(seeds)}")
    return seeds


def stack_obs(obs: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per-env observation dicts -> one dict of (N, ...) arrays."""
    return {k: np.stack([o[k] for o in obs]) for k in obs[0]}


class SliceStep(NamedTuple):
    """One step of a slice of k envs."""

    obs: dict[str, np.ndarray]  # key -> (k, ...)
    rewards: np.ndarray  # (k,) float64
    terminated: np.ndarray  # (k,) bool
    truncated: np.ndarray  # (k,) bool
    infos: list[dict[str, Any]]  # one per env

    def row(self, j: int) -> StepResult:
        """Env j's (obs, reward, terminated, truncated, info)."""
        obs = {k: v[j] for k, v in self.obs.items()}
        done = bool(self.terminated[j]), bool(self.truncated[j])
        return obs, float(self.rewards[j]), *done, self.infos[j]


class EnvSlice:
    """A few envs stepped one after the other (in this process or in a worker)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        self.envs = [fn() for fn in env_fns]

    def step(self, actions: np.ndarray, resets: Sequence[bool]) -> SliceStep:
        """Step env j with ``actions[j]``, or reset it where ``resets[j]`` (reward 0)."""
        out: list[StepResult] = []
        for env, a, r in zip(self.envs, actions, resets, strict=True):
            if r:
                obs, info = env.reset()
                out.append((obs, 0.0, False, False, info))
            else:
                out.append(env.step(a))
        return SliceStep(
            stack_obs([r[0] for r in out]),
            np.array([r[1] for r in out], dtype=np.float64),
            np.array([r[2] for r in out], dtype=bool),
            np.array([r[3] for r in out], dtype=bool),
            [r[4] for r in out],
        )

    def reset(self, seeds: Sequence[int | None], mask: Sequence[bool]) -> list[ResetResult | None]:
        """Reset the masked envs (seed per env); None for the others."""
        return [
            env.reset(seed=s) if m else None
            for env, s, m in zip(self.envs, seeds, mask, strict=True)
        ]

    def attributes(self, names: Sequence[str]) -> dict[str, Any]:
        return {n: getattr(self.envs[0], n) for n in names if hasattr(self.envs[0], n)}

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        """(observation space, action space) of one env."""
        return self.envs[0].observation_space, self.envs[0].action_space

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]:
        out = []
        for env in self.envs:
            attr = getattr(env, name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return out

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _spin_until_readable(conn: Connection, seconds: float = SPIN_S) -> None:
    """Poll ``conn`` without sleeping for up to ``seconds``; a blocking read does the rest."""
    end = time.perf_counter() + seconds
    while not conn.poll() and time.perf_counter() < end:
        pass


def _serve(conn: Connection, payload: bytes) -> None:
    """Worker process: build a slice, then answer commands until ``close`` (or until the
    parent is gone). A Ctrl-C reaches the whole process group: the worker ignores it and the
    parent, which decides whether the job stops, closes the worker."""
    os.environ["OMP_NUM_THREADS"] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        envs = EnvSlice(cloudpickle.loads(payload))
        conn.send(("ok", None))
    except Exception as exc:  # reported to the parent, which raises
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    while True:
        try:
            _spin_until_readable(conn)
            cmd, args = conn.recv()
        except EOFError:
            break
        if cmd == "close":
            envs.close()
            conn.send(("ok", None))
            break
        try:
            conn.send(("ok", getattr(envs, cmd)(*args)))
        except Exception as exc:  # reported to the parent, which raises
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class SliceHandle(Protocol):
    """Where a slice lives: ``submit`` a command, then read its ``result`` (one at a time)."""

    def submit(self, cmd: str, args: tuple) -> None: ...

    def result(self) -> Any:
        """The answer of the submitted command; a failure raises one line."""
        ...

    def close(self) -> None: ...


class LocalSlice:
    """A slice in this process: the command runs when its result is read."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        self.slice = EnvSlice(env_fns)
        self._cmd: tuple[str, tuple] | None = None

    def submit(self, cmd: str, args: tuple) -> None:
        self._cmd = (cmd, args)

    def result(self) -> Any:
        if self._cmd is None:
            raise RuntimeError("nothing was submitted")
        (cmd, args), self._cmd = self._cmd, None
        return getattr(self.slice, cmd)(*args)

    def close(self) -> None:
        self.slice.close()


class ProcessSlice:
    """A slice in a worker process, over a pipe.

    Args:
        env_fns: the slice's env factories. index: its number in error messages (1 = the
            first worker). context: multiprocessing context.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], index: int, context: Any) -> None:
        self.index = index
        self.conn, child = context.Pipe()
        payload = cloudpickle.dumps(list(env_fns))
        self.proc = context.Process(target=_serve, args=(child, payload), daemon=True)
        self.proc.start()
        child.close()

    def started(self) -> None:
        """Wait until the worker built its envs (raises its error if it could not)."""
        self.result()

    def submit(self, cmd: str, args: tuple) -> None:
        try:
            self.conn.send((cmd, args))
        except OSError as exc:  # a broken pipe: the worker is gone
            raise self._died() from exc

    def result(self) -> Any:
        try:
            _spin_until_readable(self.conn)
            status, value = self.conn.recv()
        except (EOFError, ConnectionResetError) as exc:
            raise self._died() from exc
        if status != "ok":
            raise RuntimeError(f"vector env worker {self.index}: {value}")
        return value

    def _died(self) -> RuntimeError:
        self.proc.join(timeout=1.0)
        return RuntimeError(
            f"vector env worker {self.index} (pid {self.proc.pid}) died, "
            f"exit code {self.proc.exitcode}"
        )

    def close(self) -> None:
        try:
            if self.proc.is_alive():
                self.conn.send(("close", ()))
                if self.conn.poll(10.0):
                    self.conn.recv()
        except (OSError, EOFError):
            pass
        self.proc.join(timeout=5.0)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5.0)
        self.conn.close()


def split_slices(n: int, parts: int) -> list[range]:
    """``n`` env indices in ``parts`` contiguous slices of near-equal size."""
    bounds = np.linspace(0, n, parts + 1).round().astype(int)
    return [range(a, b) for a, b in itertools.pairwise(bounds)]


class SlicedVectorEnv(gym.vector.VectorEnv):
    """``len(env_fns)`` envs in ``workers`` contiguous slices: the first in this process,
    the others in worker processes.

    Args:
        env_fns: one factory per env (cloudpickle: closures and lambdas are fine).
        workers: slices (default: one per usable core, at most one per env); 1 steps every env
            in this process.
        autoreset_mode: ``NEXT_STEP`` (Gymnasium's default: the step after an episode ends
            resets that env and returns its first observation with reward 0) or ``DISABLED``
            (the caller resets finished envs with ``reset(options={"reset_mask": m})``).
        context: multiprocessing start method of the workers.

    Observations returned by ``reset``/``step`` are fresh arrays; later calls never write
    into them.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        workers: int | None = None,
        autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
        context: str = "spawn",
    ) -> None:
        if not env_fns:
            raise ValueError("need at least one env")
        w = min(usable_cores() if workers is None else int(workers), len(env_fns))
        if w < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        slices = split_slices(len(env_fns), w)
        handles: list[SliceHandle] = []
        try:
            ctx = mp.get_context(context)
            remote = [
                ProcessSlice([env_fns[i] for i in s], k, ctx) for k, s in enumerate(slices) if k > 0
            ]
            handles = [LocalSlice([env_fns[i] for i in slices[0]]), *remote]
            for r in remote:
                r.started()
        except BaseException:
            for h in handles:
                h.close()
            raise
        self._setup(handles, slices, autoreset_mode)

    def _setup(
        self, handles: Sequence[SliceHandle], slices: Sequence[range], autoreset_mode: AutoresetMode
    ) -> None:
        """Spaces and state over ready ``handles`` (one per slice of ``slices``)."""
        if autoreset_mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED):
            raise ValueError(f"autoreset_mode must be NEXT_STEP or DISABLED, got {autoreset_mode}")
        self._handles, self.slices = list(handles), list(slices)
        self.closed = False
        n = self.num_envs = sum(len(s) for s in slices)
        self.workers, self.autoreset_mode = len(slices), autoreset_mode
        obs_space, act_space = self._run("spaces", [()] * len(slices))[0]
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.observation_space = gym.vector.utils.batch_space(obs_space, n)
        self.action_space = gym.vector.utils.batch_space(act_space, n)
        self.metadata = {"autoreset_mode": autoreset_mode}
        self._batch: dict[str, np.ndarray] | None = None  # key -> (N, ...) latest observations
        self._done = np.zeros(n, dtype=bool)

    # ----------------------------------------------------------------- slices
    def _run(
        self,
        cmd: str,
        per_slice: Sequence[tuple],
        while_waiting: Callable[[Any], None] | None = None,
    ) -> list[Any]:
        """``EnvSlice.<cmd>(*args)`` on every slice at once; one result per slice.
        ``while_waiting(first_result)`` runs before the other slices' answers are read."""
        if self.closed:
            raise RuntimeError("the vector env is closed")
        submitted = 0
        try:
            for h, args in zip(self._handles, per_slice, strict=True):
                h.submit(cmd, args)
                submitted += 1
        finally:
            errors: list[BaseException] = []
            out: list[Any] = []
            for i, h in enumerate(self._handles[:submitted]):
                try:  # every answer is read, also after a failure, so the next call is in step
                    out.append(h.result())
                    if i == 0 and while_waiting is not None:
                        while_waiting(out[0])
                except Exception as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]
        return out

    def _run_flat(self, cmd: str, per_slice: Sequence[tuple]) -> list[Any]:
        """:meth:`_run` of a command answering one entry per env: the per-env list."""
        return [x for part in self._run(cmd, per_slice) for x in part]

    def _split(self, values: Sequence[Any] | np.ndarray) -> list[Sequence[Any] | np.ndarray]:
        return [values[s.start : s.stop] for s in self.slices]

    # ----------------------------------------------------------------- per-env view
    def env_attributes(self, names: Sequence[str]) -> dict[str, Any]:
        """Attributes of the first env (the same for all) that exist, e.g. ``max_dpos``."""
        attrs: dict[str, Any] = self._run("attributes", [(list(names),)] * self.workers)[0]
        return attrs

    def reset_each(
        self, seeds: Sequence[int | None], mask: Sequence[bool] | None = None
    ) -> list[ResetResult | None]:
        """Reset the masked envs (all when None), slices at once; per-env results (None: kept)."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"need {self.num_envs} seeds, got {len(seeds)}")
        m = [True] * self.num_envs if mask is None else [bool(x) for x in mask]
        if len(m) != self.num_envs:
            raise ValueError(f"reset_mask must have {self.num_envs} entries, got {len(m)}")
        out = self._run_flat("reset", list(zip(self._split(seeds), self._split(m), strict=True)))
        rows = [i for i, r in enumerate(out) if r is not None]
        if len(rows) == self.num_envs:
            self._batch = stack_obs([r[0] for r in out if r is not None])
        elif rows:
            if self._batch is None:  # the first reset leaves some envs out: zeros until reset
                space = self.single_observation_space
                empty = create_empty_array(space, self.num_envs, fn=np.zeros)
                if not isinstance(empty, dict):
                    raise TypeError(f"expected dict observations, got {space}")
                self._batch = dict(empty)
            else:  # fresh arrays: observations returned before are never written
                self._batch = {k: v.copy() for k, v in self._batch.items()}
            for i in rows:
                for k, v in out[i][0].items():  # type: ignore[index]
                    self._batch[k][i] = v
        self._done[rows] = False
        return out

    def reset_one(self, i: int, seed: int | None) -> ResetResult:
        """Reset env ``i`` only."""
        result = self.reset_each([seed] * self.num_envs, [j == i for j in range(self.num_envs)])
        return result[i]  # type: ignore[return-value]

    def step_each(self, actions: np.ndarray) -> list[StepResult]:
        """Step every env with its row of ``actions`` (N, Da), no autoreset; per-env results."""
        parts = self._step(actions, np.zeros(self.num_envs, dtype=bool))
        return [part.row(j) for part in parts for j in range(len(part.rewards))]

    def _step(
        self,
        actions: np.ndarray,
        resets: np.ndarray,
        while_waiting: Callable[[SliceStep], None] | None = None,
    ) -> list[SliceStep]:
        a = np.asarray(actions)
        if a.ndim < 1 or a.shape[0] != self.num_envs:
            raise ValueError(f"actions must have {self.num_envs} rows, got shape {a.shape}")
        if self._batch is None:
            raise RuntimeError("call reset() before step()")
        args = list(zip(self._split(a), self._split(resets.tolist()), strict=True))
        parts: list[SliceStep] = self._run("step", args, while_waiting)
        self._batch = {k: np.concatenate([p.obs[k] for p in parts]) for k in parts[0].obs}
        self._done = np.concatenate([p.terminated | p.truncated for p in parts])
        return parts

    # ----------------------------------------------------------------- vector API
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        mask = (options or {}).get("reset_mask")
        results = self.reset_each(
            reset_seeds(seed, self.num_envs), None if mask is None else list(mask)
        )
        infos: dict[str, Any] = {}
        for i, r in enumerate(results):
            if r is not None:
                infos = self._add_info(infos, r[1], i)
        assert self._batch is not None
        return self._batch, infos

    def step(self, actions: np.ndarray) -> tuple[Any, ...]:
        next_step = self.autoreset_mode == AutoresetMode.NEXT_STEP
        resets = self._done if next_step else np.zeros(self.num_envs, dtype=bool)
        infos: dict[str, Any] = {}

        def add_infos(part: SliceStep, start: int) -> None:
            nonlocal infos
            for j, info in enumerate(part.infos):
                infos = self._add_info(infos, info, start + j)

        # the local slice's infos are gathered while the workers still step
        parts = self._step(actions, resets, lambda local: add_infos(local, 0))
        for part, s in zip(parts[1:], self.slices[1:], strict=True):
            add_infos(part, s.start)
        rewards = np.concatenate([p.rewards for p in parts])
        terminated = np.concatenate([p.terminated for p in parts])
        truncated = np.concatenate([p.truncated for p in parts])
        assert self._batch is not None
        return self._batch, rewards, terminated, truncated, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``getattr(env, name)(*args, **kwargs)`` (or the attribute) of every env."""
        return tuple(self._run_flat("call", [(name, args, kwargs)] * len(self.slices)))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def close(self, **kwargs: Any) -> None:
        if self.closed or not hasattr(self, "_handles"):
            return
        self.closed = True
        for h in self._handles:
            h.close()
