"""The actor side of split residual RL (robot PC): envs, the frozen base, the residual actor of
the last weights received, exploration, human takeover; transitions stream to the learner.

The control loop never waits on the network: :meth:`robotrl.distributed.ActorClient.add` and
``sync`` only queue and swap references. Until the first weights arrive the actor executes the
base plus uniform warm-up noise; afterwards ``a = clip(a_b + a_r + explore noise)``. If the
learner dies the actor keeps acting with the weights it has; transitions wait in the client's
bounded outbox (overflow is counted as dropped) and are re-sent once a learner answers.

Each transition carries ``extras = {"intervention": bool, "t": int64}``, ``t`` numbering the
transitions of its env so the learner can tell a gap from a successor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from robotrl.algos.residual import ResidualAgent
from robotrl.algos.residual_rollout import ResidualRollout, ResidualTransition
from robotrl.algos.residual_training import TrainConfig, recent_episode_rates, warmup_actions


class ResidualActor:
    """Holds the acting weights: a :class:`robotrl.distributed.Actor` over ``agent.actor``."""

    def __init__(self, agent: ResidualAgent) -> None:
        self.agent = agent
        self.loaded = False  # weights received at least once

    def load_state_dict(self, state_dict: Mapping[str, np.ndarray]) -> None:
        """Replace the residual actor's weights (strict: names and shapes must match)."""
        own = self.agent.actor.state_dict()
        bad = sorted(set(own) ^ set(state_dict)) + [
            k for k in own if k in state_dict and tuple(own[k].shape) != state_dict[k].shape
        ]
        if bad:
            raise ValueError(
                f"the learner's weights do not fit this actor (hidden/layers/obs keys differ?): "
                f"mismatched {bad[:5]}"
            )
        self.agent.actor.load_state_dict(
            {k: torch.from_numpy(np.array(v)) for k, v in state_dict.items()}
        )
        self.loaded = True


def run_actor(
    client: Any,
    rollout: ResidualRollout,
    agent: ResidualAgent,
    train: TrainConfig,
    *,
    actor_hz: float = 0.0,
    evaluate: Callable[[ResidualAgent], dict[str, float]] | None = None,
    step_offset: int = 0,
    flush_timeout: float = 30.0,
    stop: threading.Event | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    progress_every_s: float = 0.5,
    settle_s: float = 0.0,
    settle_quiet_s: float = 1.5,
) -> dict[str, Any]:
    """Act until ``train.total_steps`` env steps (counting ``step_offset`` already done by an
    earlier actor process) or ``stop``; then flush the outbox. Returns evaluations, counters and
    the control loop's step times.

    Args:
        client: a connected :class:`robotrl.distributed.ActorClient`.
        actor_hz: env steps per second per env (0: as fast as the env runs).
        evaluate: ``evaluate(agent) -> {"success_rate", ...}`` run every ``train.eval_every``
            env steps with the current weights (None: no evaluation).
        settle_s: after the last step and the flush, wait up to this long [s] for the learner
            to run the updates it still owes (no new weights version for ``settle_quiet_s``),
            then evaluate once more: the final evaluation then measures the updates the data
            paid for, not how far a loaded learner got in wall-clock time (0: do not wait).
    """
    stop = stop or threading.Event()
    rng = np.random.default_rng(train.seed)
    actor = ResidualActor(agent)
    counters = np.zeros(rollout.num_envs, np.int64)
    evaluations: list[dict[str, Any]] = []
    step_s: list[float] = []
    t0 = time.monotonic()

    def send(t: ResidualTransition) -> None:
        client.add(
            {"features": t.features, "base_action": t.base_action},
            t.action,
            t.reward,
            {"features": t.next_features, "base_action": t.next_base_action},
            t.terminated,
            t.truncated,
            t.env_id,
            {"intervention": np.bool_(t.intervention), "t": counters[t.env_id].copy()},
        )
        counters[t.env_id] += 1

    def snapshot() -> dict[str, Any]:
        s = client.stats()
        return {
            "t": round(time.monotonic() - t0, 3),
            "wall": time.time(),  # seconds since the epoch, to line up several processes
            "env_steps": step_offset + rollout.env_steps,
            "version": s.weights_version,
            "connected": s.connected,
            "sent": s.sent,
            "acked": s.acked,
            "dropped": s.dropped,
            "reconnects": s.reconnects,
        }

    def evaluate_now() -> None:
        if evaluate is not None:
            row = {**snapshot(), **evaluate(agent), **recent_episode_rates(rollout.episodes)}
            evaluations.append(row)
            if on_progress is not None:
                on_progress({"event": "eval", **row})

    evaluate_now()
    tick = next_report = time.monotonic()
    every = max(train.eval_every, 1)
    n = rollout.num_envs
    while step_offset + rollout.env_steps < train.total_steps and not stop.is_set():
        start = time.perf_counter()
        client.sync(actor)
        feats, a_b = rollout.observe(send)
        if actor.loaded:
            actions, _ = agent.act(feats, a_b, explore=True, rng=rng)
        else:
            actions = warmup_actions(a_b, train.warmup_noise, rng, agent.mask.numpy())
        rollout.step(actions, send)
        step_s.append(time.perf_counter() - start)
        steps = step_offset + rollout.env_steps
        if evaluate is not None and steps // every != (steps - n) // every:
            evaluate_now()
            tick = time.monotonic()  # evaluation time is not made up by stepping faster
        now = time.monotonic()
        if on_progress is not None and now >= next_report:
            on_progress({"event": "progress", **snapshot()})
            next_report = now + progress_every_s
        if actor_hz > 0:
            tick += 1.0 / actor_hz
            time.sleep(max(0.0, tick - time.monotonic()))
    flushed = client.flush(flush_timeout)
    client.sync(actor)
    settled = None
    if settle_s > 0:
        settled = _settle(client, actor, settle_s, settle_quiet_s)
    last = evaluations[-1] if evaluations else None
    if last is not None and (
        last["env_steps"] != step_offset + rollout.env_steps
        or last["version"] != client.stats().weights_version
    ):
        evaluate_now()
    s = client.stats()
    times = np.asarray(step_s) if step_s else np.zeros(1)
    return {
        "env_steps": step_offset + rollout.env_steps,
        "episodes": len(rollout.episodes),
        "evaluations": evaluations,
        "flushed": flushed,
        "sent": s.sent,
        "acked": s.acked,
        "dropped": s.dropped,
        "rejected": s.rejected,
        "resent": s.resent,
        "reconnects": s.reconnects,
        "weights_version": s.weights_version,
        "step_ms_median": float(np.median(times) * 1e3),
        "step_ms_max": float(times.max() * 1e3),
        "settled": settled,
        **recent_episode_rates(rollout.episodes),
    }


def _settle(client: Any, actor: Any, timeout_s: float, quiet_s: float) -> bool:
    """Sync weights until no new version arrived for ``quiet_s`` (the learner is idle); False
    when ``timeout_s`` ran out first."""
    end = time.monotonic() + timeout_s
    version, changed = client.stats().weights_version, time.monotonic()
    while time.monotonic() < end:
        client.sync(actor)
        v = client.stats().weights_version
        if v != version:
            version, changed = v, time.monotonic()
        elif time.monotonic() - changed >= quiet_s:
            return True
        time.sleep(0.05)
    return False
