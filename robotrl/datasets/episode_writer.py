"""Recording one episode into an :class:`~robotrl.datasets.episode_store.EpisodeStore`.

The writer buffers the episode in memory (copies of every step's arrays; two 128x128 cameras
plus state cost ~100 kB per step, ~2 MB/s at 20 Hz) and touches the disk only in
:meth:`EpisodeWriter.commit`, so ``add`` never blocks on I/O and a crash or Ctrl-C while
recording leaves the store exactly as it was.

Usage::

    with store.begin_episode(operator="ana", task="lift", language="pick up the cube") as w:
        obs, info = env.reset(seed=0)
        while True:
            action = policy(obs)
            next_obs, reward, terminated, truncated, info = env.step(action)
            w.add(obs, action, info, reward=reward)
            obs = next_obs
            if terminated or truncated:
                break
        w.commit(success=info["success"], terminated=terminated, final_obs=obs)
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from robotrl.datasets.store_layout import EpisodeStoreError, to_disk_name

if TYPE_CHECKING:
    from robotrl.datasets.episode_store import EpisodeStore

# Per-step columns the writer adds next to the observation keys: name -> dtype.
STEP_COLUMNS = {"action": np.float32, "intervention": np.bool_, "reward": np.float32}
TIMESTAMP = "timestamp"  # float64 [s] since begin_episode


class EpisodeWriter:
    """Buffers one episode; :meth:`commit` makes it visible atomically, :meth:`discard` drops it.

    As a context manager it discards on exception (and, with a warning, if the block ends
    without commit or discard).
    """

    def __init__(
        self, store: EpisodeStore, *, operator: str, task: str, language: str, extra: dict
    ) -> None:
        self._store = store
        self._meta = {"operator": operator, "task": task, "language": language}
        self._extra = json.dumps(extra)
        self._specs: dict[str, tuple[tuple[int, ...], np.dtype]] = {
            name: (tuple(v["shape"]), np.dtype(v["dtype"]))
            for name, v in store.attrs["keys"].items()
        }
        self._obs_names: set[str] = {n for n, v in store.attrs["keys"].items() if v.get("obs")}
        self._cols: dict[str, list[np.ndarray]] = {}
        self._last_obs: dict[str, np.ndarray] = {}
        self._start_time = time.time()
        self._t0 = time.monotonic()
        self._open = True

    def __len__(self) -> int:
        """Steps recorded so far."""
        return len(self._cols.get("action", ()))

    @property
    def is_open(self) -> bool:
        return self._open

    def add(
        self,
        obs: Mapping[str, np.ndarray],
        action: np.ndarray,
        info: Mapping[str, Any] | None = None,
        *,
        reward: float | None = None,
        timestamp: float | None = None,
    ) -> None:
        """Record one step: the observation the action was chosen from, and the action.

        Args:
            obs: ``{"state/<name>": (D,) float32, "images/<camera>": (H, W, 3) uint8, ...}``.
            action: (Da,) action sent to the env. If ``info["intervention"]`` is true and
                ``info["intervene_action"]`` is given, that (the executed) action is stored.
            info: env info; ``intervention`` (bool) is stored per step.
            reward: reward of this step (stored 0 when None).
            timestamp: [s] since the episode began; measured with a monotonic clock if None.
        """
        if not self._open:
            raise EpisodeStoreError("this episode was already committed or discarded")
        info = info or {}
        intervention = bool(info.get("intervention", False))
        if intervention and info.get("intervene_action") is not None:
            action = info["intervene_action"]
        if timestamp is None:
            timestamp = time.monotonic() - self._t0
        row: dict[str, np.ndarray] = {}
        for key, value in obs.items():
            name = to_disk_name(key)
            if "." in key or name in STEP_COLUMNS or name == TIMESTAMP:
                raise EpisodeStoreError(f"observation key {key!r} contains '.' or is reserved")
            row[name] = np.asarray(value)
        if self._obs_names and set(row) != self._obs_names:
            raise EpisodeStoreError(
                f"observation keys {sorted(row)} differ from the store's {sorted(self._obs_names)}"
            )
        self._obs_names = set(row)
        row["action"] = np.asarray(action)
        row["intervention"] = np.asarray(intervention)
        row["reward"] = np.asarray(0.0 if reward is None else reward)
        row[TIMESTAMP] = np.asarray(timestamp, dtype=np.float64)
        for name, value in row.items():
            spec = self._specs.get(name)
            if spec is None:
                dtype = np.dtype(STEP_COLUMNS.get(name, value.dtype))
                spec = self._specs[name] = (value.shape, dtype)
            shape, dtype = spec
            if value.shape != shape or not np.can_cast(value.dtype, dtype, "same_kind"):
                raise EpisodeStoreError(
                    f"{name}: expected shape {shape} dtype {dtype}, "
                    f"got shape {value.shape} dtype {value.dtype}"
                )
        for name, value in row.items():  # all validated: append atomically w.r.t. errors
            self._cols.setdefault(name, []).append(np.array(value, dtype=self._specs[name][1]))
        self._last_obs = {n: self._cols[n][-1] for n in self._obs_names}

    def commit(
        self,
        *,
        success: bool,
        terminated: bool = False,
        final_obs: Mapping[str, np.ndarray] | None = None,
    ) -> int:
        """Write the episode durably and make it visible; returns its index.

        Args:
            success: the task succeeded.
            terminated: the episode ended in a terminal state (no bootstrapping past it);
                False for time-limit truncation or an operator stop.
            final_obs: observation after the last action (RL needs it to bootstrap a truncated
                episode). If None the last recorded observation is stored and
                ``final_obs_valid`` is False.

        On failure (disk full, Ctrl-C) the store keeps every earlier episode, this writer stays
        open with its buffer, and the error propagates (OSError wrapped in EpisodeStoreError).
        """
        if not self._open:
            raise EpisodeStoreError("this episode was already committed or discarded")
        if len(self) == 0:
            raise EpisodeStoreError("cannot commit an empty episode (no add() calls)")
        columns = {name: np.stack(rows) for name, rows in self._cols.items()}
        if final_obs is None:
            final = dict(self._last_obs)
        else:
            final = {to_disk_name(k): np.asarray(v) for k, v in final_obs.items()}
            if set(final) != self._obs_names:
                raise EpisodeStoreError(
                    f"final_obs keys {sorted(final)} differ from the observation keys "
                    f"{sorted(self._obs_names)}"
                )
            for name, value in final.items():
                shape, dtype = self._specs[name]
                if value.shape != shape:
                    raise EpisodeStoreError(f"final_obs {name}: expected shape {shape}")
                final[name] = value.astype(dtype)
        meta = {
            "success": bool(success),
            "terminated": bool(terminated),
            "intervention_steps": int(columns["intervention"].sum()),
            "duration_s": float(time.monotonic() - self._t0),
            "start_time": self._start_time,
            **self._meta,
            "extra": self._extra,
            "final_obs_valid": final_obs is not None,
        }
        index = self._store._commit(columns, final, meta)
        self._close()
        return index

    def discard(self) -> None:
        """Drop the buffered episode; the store is untouched."""
        self._close()

    def _close(self) -> None:
        self._open = False
        self._cols = {}
        self._last_obs = {}
        self._store._writer_done(self)

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._open:
            if exc_type is None:
                warnings.warn(
                    "episode neither committed nor discarded; discarding it", stacklevel=2
                )
            self.discard()
