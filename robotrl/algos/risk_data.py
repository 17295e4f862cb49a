"""Risk data for the safety critic: transitions of scripted (risky) behaviour, labelled by the
constraint costs a monitoring :class:`sim.safety_guard.SafetyGuard` measures, and the offline
pre-training that fits and exports a :class:`~robotrl.algos.safety_critic.SafetyCritic` on them.

Each stored transition is ``(s, a, c, s', a')`` with ``a'`` the behaviour's next action
(SARSA: the critic estimates the behaviour's own risk); a violation (``c = 1``) ends the risk
episode. Shapes: O reflex features, A = 7 actions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from tqdm.auto import tqdm

import sim
from robotrl.algos.safety_critic import SafetyCritic, SafetyCriticConfig, risk_buffer
from robotrl.datasets.replay_buffer import ReplayBuffer
from sim.risky_policy import RISKY_POLICIES


def collect_risk_data(
    make_env: Callable[[], Any],
    policies: Mapping[str, Callable[[Any], Callable[[Mapping[str, np.ndarray]], np.ndarray]]],
    episodes: int,
    buffer: ReplayBuffer,
    *,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, dict[str, float]]:
    """Roll each named policy for ``episodes`` episodes in an env whose ``info["safety"]``
    carries ``cost`` and ``features`` (``sim.make(task, safety="monitor")``), adding risk
    transitions to ``buffer``.

    ``policies[name](env)`` returns a fresh policy ``obs -> action (7,)`` for one episode.
    Returns per policy: episodes, transitions, violating episodes, violating steps.
    """
    env = make_env()
    stats: dict[str, dict[str, float]] = {}
    try:
        for p_idx, (name, factory) in enumerate(policies.items()):
            st: dict[str, float] = dict.fromkeys(
                ("episodes", "transitions", "violating_episodes", "violating_steps"), 0
            )
            bar = tqdm(range(episodes), desc=f"risk data {name}", disable=not progress)
            for ep in bar:
                obs, info = env.reset(seed=seed + 10_000 * p_idx + ep)
                policy = factory(env)
                feat = env.guard.features().copy()
                prev: tuple[np.ndarray, np.ndarray, float, np.ndarray] | None = None
                done, violated = False, False
                while not done:
                    a = np.clip(np.asarray(policy(obs), np.float32), -1, 1)
                    if prev is not None:
                        add_risk_transition(buffer, *prev, a, False)
                    obs, _, term, trunc, info = env.step(a)
                    cost = float(info["safety"]["cost"])
                    nxt = info["safety"]["features"].copy()
                    st["violating_steps"] += cost
                    violated |= cost > 0
                    done = term or trunc or cost > 0  # a violation ends the risk episode
                    prev = (feat, a, cost, nxt)
                    feat = nxt
                    st["transitions"] += 1
                if prev is not None:
                    add_risk_transition(buffer, *prev, prev[1], True)
                st["episodes"] += 1
                st["violating_episodes"] += violated
            stats[name] = st
    finally:
        env.close()
    return stats


def add_risk_transition(
    buf: ReplayBuffer,
    feat: np.ndarray,
    act: np.ndarray,
    cost: float,
    nxt: np.ndarray,
    next_act: np.ndarray,
    end: bool,
) -> None:
    """Store one risk transition ``(feat, act, cost, nxt, next_act)`` in ``buf``; it is
    terminal when the risk episode ends (``end``) or the step violated (``cost > 0``)."""
    buf.add(
        {"features": feat, "act": act},
        act,
        cost,
        {"features": nxt, "act": next_act},
        terminated=end or cost > 0,
        truncated=False,
    )


def pretrain_critic(
    task: str,
    out: str | os.PathLike[str],
    *,
    episodes: int | Mapping[str, int] = 60,
    updates: int = 4000,
    policies: Iterable[str] = ("expert", "careless", "random", "adversarial"),
    task_keys: Iterable[str] = (),
    cfg: SafetyCriticConfig | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    force_limit: float | None = None,
    seed: int = 0,
    progress: bool = True,
) -> tuple[SafetyCritic, ReplayBuffer, dict[str, Any]]:
    """Collect ``episodes`` per scripted policy on ``task`` (the expert for safe data, the
    risky ones of :data:`sim.risky_policy.RISKY_POLICIES`; a mapping gives a count per
    policy), fit the critic, export it to ``out``. Returns the critic, its data and
    statistics (data, final loss, export path).

    ``force_limit`` [N] labels the data with a tighter contact-force limit than the constraint
    the reflex protects (default: :data:`controllers.constraint_cost.FORCE_LIMIT`): a safety
    margin, and more positive examples of what precedes a violation."""

    rng = np.random.default_rng(seed)
    factories: dict[str, Any] = {}
    for name in policies:
        if name == "expert":
            factories[name] = lambda env: sim.make_expert(task, env)
        elif name in RISKY_POLICIES:
            factories[name] = lambda env, f=RISKY_POLICIES[name]: f(env, rng)
        else:
            raise ValueError(
                f"unknown policy {name!r}; available: expert, {sorted(RISKY_POLICIES)}"
            )
    keys = tuple(task_keys)
    guard_kw: dict[str, Any] = {"task_keys": keys}
    if force_limit is not None:
        guard_kw["force_limit"] = float(force_limit)
    kw = {**(env_kwargs or {}), "safety": "monitor", "safety_kwargs": guard_kw}
    probe = sim.make(task, **kw)
    names = list(probe.guard.feature_names)
    obs_dim = probe.guard.features().shape[0]
    probe.close()
    counts = (
        {n: int(episodes.get(n, 0)) for n in factories}
        if isinstance(episodes, Mapping)
        else dict.fromkeys(factories, int(episodes))
    )
    buf = risk_buffer(sum(counts.values()) * 150, obs_dim, 7)
    stats: dict[str, dict[str, float]] = {}
    for i, (name, factory) in enumerate(factories.items()):
        stats.update(
            collect_risk_data(
                lambda: sim.make(task, **kw),
                {name: factory},
                counts[name],
                buf,
                seed=seed + 10_000 * i,
                progress=progress,
            )
        )
    critic = SafetyCritic(obs_dim, 7, cfg, feature_names=names, seed=seed)
    critic.set_normalization(buf.obs["features"][: len(buf)])
    logs = critic.fit(buf, updates, rng, progress=progress)
    path = critic.export(out)
    return critic, buf, {"data": stats, **logs, "critic": str(path)}
