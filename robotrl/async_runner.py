"""Real-time chunk execution: the next chunk is computed while the current one runs, and the two
are blended where they overlap, so the control loop never waits on the policy.

Timeline (ticks are control steps; a chunk requested at tick ``r`` is conditioned on the
observation of tick ``r`` and its action ``j`` is meant for tick ``r + j``)::

    chunk i   requested at r ......... runs indices [d, d+Te) ... | tail (Ta-d-Te actions)
    chunk i+1        requested at r+Te (d actions of chunk i left) -> ready after D ticks
                                                  switch at r+Te+d: runs [d, d+Te), blended
                                                  over the first b ticks with chunk i's tail

- Lookahead ``d``: inference for the next chunk starts when the current chunk has ``d``
  actions of its window left. If the inference delay ``D <= d`` ticks, the new chunk is ready
  by the switch tick and the loop never stalls; its first ``d`` actions (meant for ticks that
  have passed by then) are skipped, as in real-time chunking (Black et al., 2025).
- Blend: for ``k = 0 .. b-1`` ticks after a switch, ``a = (1 - w_k) a_old + w_k a_new`` with
  ``w_k = (k + 1) / (b + 1)`` (linear cross-fade, as temporal ensembling but over one seam):
  the first new action differs from the old plan by only ``1 / (b + 1)`` of the gap.
- Late chunk (``D > d``): every tick past the window without a new chunk is a *stall*
  (counted); the current chunk's own remaining actions (it predicted up to Ta) are used, then a
  hold action. The late chunk is used from the index of the tick it arrives at (stale actions
  skipped), runs Te actions from there, and is blended only over what is left of the old
  chunk (a hard switch after a hold).
- Policy exception, or a malformed chunk: fail closed. Queued actions are dropped at once and
  every later tick returns the hold action (zero motion, ``keep_dims`` — the gripper by
  default — kept from the last command); the exception is in :attr:`AsyncChunkRunner.error`,
  logged, passed to ``on_error`` and counted. Only :meth:`AsyncChunkRunner.reset` re-arms it.

Inference runs on a worker thread. :class:`InferenceWorker` is real time (a result is used as
soon as it exists). :class:`SimulatedTimeWorker` makes a result visible exactly ``D`` ticks
after its request (fixed, or from the measured compute time at a control rate), waiting for the
thread if needed: simulated time, deterministic, with the same thread and error paths.

The tick path is numpy only; torch is touched on the worker thread.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robotrl.chunk_runner import LANGUAGE_KEY, policy_keys
from robotrl.inference_worker import InferenceResult, InferenceWorker, SimulatedTimeWorker

log = logging.getLogger(__name__)

__all__ = [
    "AsyncChunkRunner",
    "InferenceResult",
    "InferenceWorker",
    "RunnerStats",
    "SimulatedTimeWorker",
    "lookahead_for",
]


@dataclass
class RunnerStats:
    """Counters of an :class:`AsyncChunkRunner` (cumulative over episodes).

    Attributes:
        ticks: control ticks served. stalls: ticks where the due chunk was not ready (deadline
        misses; 0 whenever the inference delay <= lookahead). warmup_ticks: ticks before an
        episode's first chunk arrived (hold action). held_ticks: ticks that sent the hold action
        for any reason. requests / chunks: inferences started / chunks put into execution.
        discarded: chunks that arrived with no action left for the present (or from a previous
        episode). errors: policy failures. delays: request-to-ready delay [ticks] per chunk.
    """

    ticks: int = 0
    stalls: int = 0
    warmup_ticks: int = 0
    held_ticks: int = 0
    requests: int = 0
    chunks: int = 0
    discarded: int = 0
    errors: int = 0
    delays: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "delays"}
        d["max_delay_ticks"] = max(self.delays, default=0)
        d["mean_delay_ticks"] = round(float(np.mean(self.delays)), 3) if self.delays else 0.0
        return d


def lookahead_for(latency_s: float, control_hz: float, margin: int = 1) -> int:
    """Lookahead [ticks] covering an inference latency [s] at ``control_hz``, plus a margin."""
    return math.ceil(latency_s * control_hz - 1e-9) + margin


def _to_numpy(chunk: Any) -> np.ndarray:
    if hasattr(chunk, "detach"):
        chunk = chunk.detach().cpu().numpy()
    return np.asarray(chunk)


class AsyncChunkRunner:
    """Runs one env's :class:`~robotrl.types.ChunkPolicy` with inference off the control path.

    ``reset()`` / ``__call__(obs) -> action`` make it an ``EpisodePolicy``
    (:func:`robotrl.evaluation.evaluate`); one call is one control tick.

    Args:
        policy: ``predict_chunk({key: (1, To, ...)}) -> (1, Ta, Da)`` (torch or numpy).
        execute_horizon: Te actions run per chunk.
        lookahead: d >= the expected inference delay [ticks]; ``d + Te <= Ta``.
        blend_steps: b ticks of cross-fade after a switch; default ``Ta - Te - d`` (all the
            overlap the old chunk covers); ``0 <= b <= Ta - Te - d``.
        worker: :class:`InferenceWorker` (default, real time) or :class:`SimulatedTimeWorker`.
        keep_dims: action dims the hold action keeps from the last command (others are 0:
            zero delta pose); default the gripper (last dim).
        initial_action: (Da,) sent before the first chunk of an episode (default zeros).
        obs_keys: observation keys the policy reads (default from ``policy.config``).
        on_error: called on the control thread with a policy exception when it is surfaced.
    """

    def __init__(
        self,
        policy: Any,
        execute_horizon: int = 8,
        lookahead: int = 2,
        blend_steps: int | None = None,
        worker: InferenceWorker | None = None,
        keep_dims: Sequence[int] = (-1,),
        initial_action: np.ndarray | None = None,
        obs_keys: Sequence[str] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        ta, da = int(policy.action_horizon), int(policy.action_dim)
        te, d = int(execute_horizon), int(lookahead)
        if te < 1 or d < 0 or d + te > ta:
            raise ValueError(
                f"need execute_horizon >= 1, lookahead >= 0 and lookahead + execute_horizon <= "
                f"Ta={ta}; got Te={te}, d={d}"
            )
        b = ta - te - d if blend_steps is None else int(blend_steps)
        if not 0 <= b <= ta - te - d:
            raise ValueError(f"blend_steps must be in [0, Ta - Te - d = {ta - te - d}], got {b}")
        self.policy = policy
        self.ta, self.da, self.te, self.d, self.b = ta, da, te, d, b
        self.keys = list(obs_keys) if obs_keys is not None else policy_keys(policy)
        self.keep_dims = [int(k) for k in keep_dims]
        init = np.zeros(da) if initial_action is None else np.asarray(initial_action, float)
        if init.shape != (da,):
            raise ValueError(f"initial_action must be ({da},), got {init.shape}")
        self.initial_action = init.astype(np.float32)
        self.worker = worker if worker is not None else InferenceWorker()
        self.on_error = on_error
        self.stats = RunnerStats()
        # per-tick work arrays, allocated once
        self._last = self.initial_action.copy()
        self._hold = np.zeros(da, np.float32)
        self._blend_prev = np.zeros((max(b, 1), da), np.float32)
        self._out = np.zeros(da, np.float32)
        self._closed = False
        self._tick = 0  # control ticks since construction: time runs on across resets
        self._episode = 0
        self._inflight_episode = 0
        self._begin_episode()

    # ---------------------------------------------------------------- lifecycle
    def _begin_episode(self) -> None:
        self._horizon = int(self.policy.obs_horizon)
        self._history: deque[dict[str, np.ndarray | str]] = deque(maxlen=self._horizon)
        self._chunk: np.ndarray | None = None  # (Ta, Da) in execution
        self._chunk_req = 0  # its request tick
        self._chunk_end = 0  # its window end (exclusive index)
        self._pending: tuple[np.ndarray, int] | None = None  # arrived, waits for its switch tick
        self._switch_tick = 0
        self._blend_n = 0  # ticks of cross-fade after the last switch
        self._error: BaseException | None = None
        self._last[:] = self.initial_action

    def reset(self) -> None:
        """New episode: forget history, chunks and a failure; an inference still running for
        the previous episode is discarded when it arrives."""
        self._check_open()
        self._episode += 1
        self._begin_episode()
        self.policy.reset()

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the worker thread; later calls raise. Returns whether the thread ended."""
        self._closed = True
        return self.worker.close(timeout)

    def __enter__(self) -> AsyncChunkRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the runner is closed")

    @property
    def error(self) -> BaseException | None:
        """The policy exception that made this episode fail closed (None while healthy)."""
        return self._error

    # ---------------------------------------------------------------- one tick
    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """(Da,) action for this tick from one env's observation ``{key: array}``. Never waits
        for a :class:`InferenceWorker`."""
        self._check_open()
        self._push(obs)
        t = self._tick
        if self._error is None:
            self._collect(t)
        if self._error is None:
            self._install(t)
            self._request(t)
        a = self._select(t)
        self._last[:] = a
        self._tick += 1
        self.stats.ticks += 1
        return a.copy()

    act = __call__

    def _push(self, obs: Mapping[str, np.ndarray]) -> None:
        missing = [k for k in self.keys if k not in obs]
        if missing:
            raise KeyError(f"the env does not provide {missing}, which the policy reads")
        # copies: envs may reuse buffers (the instruction stays a str)
        entry = {k: str(obs[k]) if k == LANGUAGE_KEY else np.array(obs[k]) for k in self.keys}
        if not self._history:
            self._history.extend([entry] * self._horizon)  # edge padding, as in training
        else:
            self._history.append(entry)

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        self._chunk, self._pending = None, None  # fail closed: nothing queued survives
        self.stats.errors += 1
        log.error("policy inference failed; holding: %r", exc)
        if self.on_error is not None:
            self.on_error(exc)

    def _collect(self, t: int) -> None:
        res = self.worker.poll(t)
        if res is None:
            return
        if res.error is not None:
            self._fail(res.error)  # even if requested before a reset: the policy is broken
            return
        if self._inflight_episode != self._episode:
            self.stats.discarded += 1  # requested before a reset
            return
        chunk = _to_numpy(res.value)
        if chunk.shape != (1, self.ta, self.da) or not np.all(np.isfinite(chunk)):
            self._fail(
                ValueError(
                    f"policy returned a chunk of shape {chunk.shape} (expected (1, {self.ta}, "
                    f"{self.da})) or with non-finite values"
                )
            )
            return
        self._pending = (chunk[0].astype(np.float32), res.submit_tick)
        self.stats.delays.append(t - res.submit_tick)

    def _install(self, t: int) -> None:
        if self._pending is None:
            return
        chunk, req = self._pending
        old = self._chunk
        if old is not None and t < req + self.d:
            return  # early: the switch tick has not come yet
        i = t - req  # index of the action meant for this tick
        self._pending = None
        if i >= self.ta:
            self.stats.discarded += 1  # nothing left for the present: ask again
            return
        # cross-fade over the overlap the old chunk still covers (all b ticks when on time;
        # less, or none, after a stall that ate into its tail)
        n = 0 if old is None else max(0, min(self.b, self.ta - (t - self._chunk_req)))
        if old is not None and n > 0:
            j = t - self._chunk_req
            self._blend_prev[:n] = old[j : j + n]
        self._blend_n, self._switch_tick = n, t
        self._chunk, self._chunk_req = chunk, req
        self._chunk_end = min(i + self.te, self.ta)
        self.stats.chunks += 1

    def _request(self, t: int) -> None:
        if self._pending is not None or self.worker.busy:
            return
        if self._chunk is not None and self._chunk_end - (t - self._chunk_req) > self.d:
            return
        batch = {
            k: np.stack([h[k] for h in self._history])[None] for k in self.keys if k != LANGUAGE_KEY
        }
        # a language-conditioned policy reads the newest instruction, tokenised by its own
        # tokenizer ((1, L) ids, no history)
        text = str(self._history[-1][LANGUAGE_KEY]) if LANGUAGE_KEY in self.keys else None
        policy = self.policy

        def job() -> np.ndarray:
            import torch

            tensors = {k: torch.from_numpy(v) for k, v in batch.items()}
            if text is not None:
                tensors[LANGUAGE_KEY] = torch.from_numpy(policy.tokenizer.encode_batch([text])[0])
            with torch.no_grad():
                out = policy.predict_chunk(tensors)
            return _to_numpy(out)

        self.worker.submit(job, t)
        self._inflight_episode = self._episode
        self.stats.requests += 1

    def _hold_action(self) -> np.ndarray:
        self._hold[:] = 0.0
        self._hold[self.keep_dims] = self._last[self.keep_dims]
        self.stats.held_ticks += 1
        return self._hold

    def _select(self, t: int) -> np.ndarray:
        if self._error is not None:
            return self._hold_action()
        if self._chunk is None:
            self.stats.warmup_ticks += 1
            self._out[:] = self.initial_action
            self.stats.held_ticks += 1
            return self._out
        i = t - self._chunk_req
        if i >= self._chunk_end:
            self.stats.stalls += 1  # the next chunk is due and not ready
            return self._chunk[i] if i < self.ta else self._hold_action()
        k = t - self._switch_tick
        if k < self._blend_n:
            w = (k + 1) / (self._blend_n + 1)
            np.multiply(self._blend_prev[k], 1.0 - w, out=self._out)
            self._out += w * self._chunk[i]
            return self._out
        return self._chunk[i]
