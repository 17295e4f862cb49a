"""The residual RL loop: frozen base in chunk mode, residual actor on top, demo + online replay,
optional human (or scripted) interventions. Reads top to bottom like a cleanrl script, but is a
function so the CLI, tests and benchmarks share it.

Per env step, for N envs stepped in this process:
1. the base's chunk queue gives ``a_b`` for every env; the residual actor adds ``a_r``
   (during warm-up: base + uniform noise);
2. an intervening human replaces the executed action; such transitions go to the online AND
   the demo buffer (HIL-SERL) and are counted per episode;
3. the transition ``(s, a_b, a, r, s', a_b')`` is stored once ``a_b'`` is known (the next
   step's queue action, or a fresh plan at an episode end);
4. after ``warmup_steps`` env steps, ``critic_warmup_updates`` critic-only updates, then
   ``utd`` updates per env step on batches mixing demos and online data.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike
from tqdm.auto import tqdm

from robotrl.algos.agent_run import AgentRun, finish_run, record_evaluation
from robotrl.algos.kept_agent import KeptAgent
from robotrl.algos.residual import Featurizer, ResidualAgent, ResidualConfig
from robotrl.algos.residual_policy import ResidualActor, ResidualPolicy
from robotrl.algos.residual_rollout import Intervener, ResidualRollout, ResidualTransition
from robotrl.chunk_runner import LANGUAGE_KEY, policy_keys
from robotrl.datasets import EpisodeStore, MixedReplay, ReplayBuffer
from robotrl.datasets.replay_buffer import concat_batches
from robotrl.evaluation import evaluate, evaluate_vector
from robotrl.metrics import MetricsLogger


@dataclass
class TrainConfig:
    """Schedule of :func:`train_residual`.

    Attributes:
        total_steps: env steps (summed over envs); must exceed ``warmup_steps``.
        warmup_steps: env steps of base + uniform noise before learning.
        warmup_noise: half-width of that noise [action units].
        critic_warmup_updates: critic-only updates before the actor starts.
        eval_every: env steps between evaluations. eval_episodes: episodes per evaluation.
        eval_seed: first evaluation seed. buffer_size: online capacity. seed: all RNGs.
        target_success: stop early once an evaluation reaches it (None: run to the end).
        keep_best: the agent returned is the one of the best evaluation (the latest among
            equals; the zero residual, i.e. the base, unless an evaluation beats the base's
            own: a tie does not); False: the last.
    """

    total_steps: int = 20_000
    warmup_steps: int = 1_000
    warmup_noise: float = 0.05
    critic_warmup_updates: int = 1_000
    eval_every: int = 2_000
    eval_episodes: int = 20
    eval_seed: int = 100_000
    buffer_size: int = 200_000
    seed: int = 0
    target_success: float | None = None
    keep_best: bool = True
    realtime_hz: float = 0.0


# algo=rlpd: this learner on a zero base, from scratch with the demos (RLPD-style). The actor
# acts alone: it spans the whole action range, reads no base action, is pulled towards no base
# and leaves the demos to the critic, at RLPD's learning rate; the warm-up explores the whole
# range. Keys: ResidualConfig fields, and TrainConfig's warmup_noise.
FROM_SCRATCH: dict[str, Any] = {
    "scale": 1.0,
    "residual_l2": 0.0,
    "base_input": False,
    "demo_bc": 0.0,
    "actor_lr": 3e-4,
    "warmup_noise": 1.0,
}


TrainResult = AgentRun[ResidualAgent]


def check_budget(total_steps: int, warmup_steps: int, eval_every: int = 0) -> None:
    """Raise ValueError when ``total_steps`` ends before the actor learns anything (no env step
    after ``warmup_steps``), naming both numbers and a budget that would train."""
    if total_steps > warmup_steps:
        return
    every = max(int(eval_every), 1)
    # the first evaluation after warm-up: a budget whose last evaluation saw a trained actor
    example = (max(warmup_steps, 0) // every + 1) * every
    raise ValueError(
        f"total_steps={total_steps} ends before learning starts (warmup_steps={warmup_steps}): "
        f"give total_steps > warmup_steps, e.g. total_steps={example}, or lower warmup_steps"
    )


def _spec(feat_dim: int, act_dim: int) -> dict[str, tuple[tuple[int, ...], Any]]:
    # "human": 1 on transitions whose executed action came from an intervening human, "demo": 1
    # on demonstrations; the actor imitates either (ResidualConfig.intervention_bc / demo_bc)
    return {
        "features": ((feat_dim,), np.float32),
        "base_action": ((act_dim,), np.float32),
        "human": ((), np.float32),
        "demo": ((), np.float32),
    }


_NOT_IMITATED = {"human": 0.0, "demo": 0.0}


def demo_buffer(
    store: EpisodeStore,
    base: Any,
    featurizer: Featurizer,
    cfg: ResidualConfig,
    capacity: int | None = None,
    episodes: Sequence[int] | np.ndarray | None = None,
    seed: int = 0,
) -> ReplayBuffer:
    """Demo transitions: the demo action as executed action, the base action recomputed (a
    fresh plan) on each demo observation window, per-step rewards and episode ends from the
    store. ``episodes``: which episodes to use (default all; e.g. the intact ones). ``seed``:
    the base's sampling noise for those plans (the global torch RNG is left as it was), so the
    buffer is the same for the same seed."""
    act_dim = int(store.array("action").shape[1])
    buf = ReplayBuffer(
        capacity or max(store.num_steps, 1),
        _spec(featurizer.dim, act_dim),
        act_dim,
        n_step=cfg.n_step,
        gamma=cfg.gamma,
    )
    keys = policy_keys(base)  # its state entries, cameras, and the instruction for a VLA
    raw = featurizer.raw_keys  # a perception featurizer's hold cameras and the instruction
    needed = [k for k in dict.fromkeys([*keys, *raw]) if k != LANGUAGE_KEY]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for full in store.episodes(None if episodes is None else [int(i) for i in episodes]):
            t_len = len(full["action"])
            obs_seq = [{k: full[k][t] for k in needed} for t in range(t_len)]
            obs_seq.append({k: np.asarray(full["final_obs"][k]) for k in needed})
            base_actions = _replanned_base_actions(base, obs_seq, keys, str(full["language"]))
            feats = featurizer(
                {
                    **{k: np.stack([o[k] for o in obs_seq]) for k in raw if k != LANGUAGE_KEY},
                    LANGUAGE_KEY: np.array([str(full["language"])] * len(obs_seq)),
                }
            )
            terminated = bool(full["terminated"])
            for t in range(t_len):
                last = t == t_len - 1
                buf.add(
                    {
                        "features": feats[t],
                        "base_action": base_actions[t],
                        **_NOT_IMITATED,
                        "demo": 1.0,
                    },
                    full["action"][t],
                    float(full["reward"][t]),
                    {"features": feats[t + 1], "base_action": base_actions[t + 1], **_NOT_IMITATED},
                    terminated=last and terminated,
                    truncated=last and not terminated,
                )
    return buf


@torch.no_grad()
def _replanned_base_actions(
    base: Any, obs_seq: Sequence[Mapping[str, np.ndarray]], keys: Sequence[str], language: str
) -> np.ndarray:
    """(T, Da) first action of a chunk planned at every step of a sequence (edge-padded);
    ``language``: the episode's instruction (read when ``keys`` hold it)."""
    to = base.obs_horizon
    idx = np.clip(np.arange(len(obs_seq))[:, None] + np.arange(-to + 1, 1)[None], 0, None)
    stacked = {k: np.stack([o[k] for o in obs_seq]) for k in keys if k != LANGUAGE_KEY}
    # one instruction per episode, tokenised once: (1, L) ids
    ids = (
        torch.from_numpy(base.tokenizer.encode_batch([language])[0])
        if LANGUAGE_KEY in keys
        else None
    )
    out = []
    for start in range(0, len(obs_seq), 256):
        rows = idx[start : start + 256]
        batch = {k: torch.from_numpy(v[rows]) for k, v in stacked.items()}
        if ids is not None:
            batch[LANGUAGE_KEY] = ids.expand(len(rows), -1)
        out.append(base.predict_chunk(batch)[:, 0].cpu().numpy())
    return np.concatenate(out).astype(np.float32)


def evaluate_residual(
    agent: ResidualActor,
    base: Any,
    featurizer: Featurizer,
    make_env: Callable[[], Any],
    episodes: int,
    seed: int,
    execute_horizon: int,
    venv: Any | None = None,
) -> dict[str, float]:
    """Deterministic residual on top of the base: success rate, mean length and the residual's
    statistics. With a vector env ``venv`` (next-step autoreset) the episodes run on its envs
    at once, seeded as :func:`~robotrl.evaluation.evaluate_vector` does; else on one env from
    ``make_env``."""
    policy = ResidualPolicy(agent, base, featurizer, execute_horizon)
    residuals: list[np.ndarray] = []
    if venv is not None:
        runner = policy.vector_runner(venv.num_envs)
        res = evaluate_vector(
            venv,
            runner,
            episodes,
            seed=seed,
            progress=False,
            on_step=lambda stepped: residuals.extend(runner.last_residuals[stepped]),
        )
    else:
        env = make_env()
        try:
            res = evaluate(
                env,
                policy,
                episodes,
                seed=seed,
                progress=False,
                on_step=lambda _env: residuals.append(policy.last_residual),
            )
        finally:
            env.close()
    res_mean = np.mean(residuals, axis=0)
    out = {
        "success_rate": res.success_rate,
        "mean_length": res.mean_length,
        "residual_abs_mean": float(np.mean(np.abs(residuals))),
    }
    out.update({f"residual_mean_{j}": float(v) for j, v in enumerate(res_mean)})
    return out


class ResidualReplay:
    """The residual learner's buffers.

    ``online`` holds every transition; ``hil`` the intervened ones. ``replay`` samples batches
    mixing online data with the demo side (demos and interventions, in proportion to their
    sizes: HIL-SERL's mix).

    Args:
        feat_dim: O. act_dim: A. cfg: residual hyperparameters (n-step, gamma, mix).
        buffer_size: online capacity [transitions]; ``hil`` holds a quarter of it.
        demos: the demo buffer (or None). num_envs: env streams the buffers interleave.
    """

    def __init__(
        self,
        feat_dim: int,
        act_dim: int,
        cfg: ResidualConfig,
        buffer_size: int,
        *,
        demos: ReplayBuffer | None = None,
        num_envs: int = 1,
    ) -> None:
        spec = _spec(feat_dim, act_dim)

        def buffer(size: int) -> ReplayBuffer:
            return ReplayBuffer(
                size, spec, act_dim, n_step=cfg.n_step, gamma=cfg.gamma, num_envs=num_envs
            )

        self.online = buffer(buffer_size)
        self.hil = buffer(max(buffer_size // 4, 1))
        side = [b for b in (demos, self.hil) if b is not None]
        self.replay = MixedReplay(self.online, _UnionBuffer(side), cfg.demo_fraction)  # type: ignore[arg-type]

    def store(self, t: ResidualTransition) -> None:
        """Write one transition (``t.env_id`` names its env stream) to ``online``, and to
        ``hil`` when a human intervened."""
        o: dict[str, ArrayLike] = {
            "features": t.features,
            "base_action": t.base_action,
            **_NOT_IMITATED,
        }
        o["human"] = float(t.intervention)
        o2: dict[str, ArrayLike] = {
            "features": t.next_features,
            "base_action": t.next_base_action,
            **_NOT_IMITATED,
        }
        args = (o, t.action, t.reward, o2, t.terminated, t.truncated)
        self.online.add(*args, env_id=t.env_id)
        if t.intervention:
            self.hil.add(*args, env_id=t.env_id)


def train_residual(
    base: Any,
    make_env: Callable[[], Any],
    featurizer: Featurizer,
    cfg: ResidualConfig,
    train: TrainConfig,
    *,
    demos: ReplayBuffer | None = None,
    num_envs: int = 1,
    execute_horizon: int = 8,
    intervener: Intervener | None = None,
    logger: MetricsLogger | None = None,
    progress: bool = True,
    agent: ResidualAgent | None = None,
    vector_env: Any | None = None,
    eval_venv: Any | None = None,
    make_eval_env: Callable[[], Any] | None = None,
    stop: threading.Event | None = None,
) -> TrainResult:
    """Train a residual actor on the frozen ``base``; see the module docstring.
    ``vector_env``: the training envs live elsewhere (Ray workers, see
    :class:`~robotrl.algos.residual_rollout.ResidualRollout`). ``eval_venv``: a vector env
    (next-step autoreset) the evaluations run on; None: one env from ``make_eval_env``
    (None: from ``make_env``; e.g. the task's success where training has a classifier's).
    ``stop``: once set (e.g. by :func:`robotrl.stop_request.stop_request`), the run ends after
    the current env step or evaluation, keeps its agent as at the end of a full run and sets
    ``interrupted``.

    The progress bar counts env steps; its postfix shows the phase (``warm-up``,
    ``critic warm-up i/N``, ``train``, ``eval``) and the latest evaluation's success rate.
    Raises ValueError, before any env is made, when ``train.total_steps`` does not exceed
    ``train.warmup_steps``."""
    check_budget(train.total_steps, train.warmup_steps, train.eval_every)
    rng = np.random.default_rng(train.seed)
    torch.manual_seed(train.seed)
    freeze(base)
    act_dim = base.action_dim
    agent = agent or ResidualAgent(featurizer.dim, act_dim, cfg, seed=train.seed)
    buffers = ResidualReplay(
        featurizer.dim, act_dim, cfg, train.buffer_size, demos=demos, num_envs=num_envs
    )
    replay = buffers.replay
    rollout = ResidualRollout(
        base,
        make_env,
        featurizer,
        num_envs=num_envs,
        execute_horizon=execute_horizon,
        seed=train.seed,
        intervener=intervener,
        vector_env=vector_env,
    )

    sink = buffers.store

    result = TrainResult(agent=agent, episodes=rollout.episodes, safety=rollout.safety)
    start = time.perf_counter()
    bar = tqdm(total=train.total_steps, desc="residual", disable=not progress)
    postfix: dict[str, str] = {}

    def show(**values: str) -> None:  # called on phase changes only: each call redraws
        postfix.update(values)
        bar.set_postfix(postfix)

    critic_warm = False
    last_logs: dict[str, float] = {}
    kept = KeptAgent(agent, train.keep_best)
    tick = time.perf_counter()

    def evaluate_now() -> None:
        phase = postfix.get("phase", "warm-up")
        show(phase="eval")
        ev = evaluate_residual(
            agent,
            base,
            featurizer,
            make_eval_env or make_env,
            train.eval_episodes,
            train.eval_seed,
            execute_horizon,
            venv=eval_venv,
        )
        row = {
            "env_steps": rollout.env_steps,
            "wall_s": time.perf_counter() - start,
            **ev,
            **recent_episode_rates(result.episodes),
            **last_logs,
        }
        record_evaluation(result, row, kept, logger, train.target_success)
        show(phase=phase, success=f"{ev['success_rate']:.2f}")

    def critic_warmup() -> None:
        n = train.critic_warmup_updates
        for i in range(n):
            # no env step moves the bar meanwhile: the postfix shows that work goes on
            if i % 50 == 0:
                show(phase=f"critic warm-up {i}/{n}")
            agent.update(replay.sample(cfg.batch_size, rng), update_actor=False)
        show(phase="train")

    show(phase="warm-up")
    evaluate_now()  # the base alone (the residual starts at zero)
    while rollout.env_steps < train.total_steps:
        if stop is not None and stop.is_set():
            result.interrupted = True
            break
        feats, a_b = rollout.observe(sink)
        if rollout.env_steps < train.warmup_steps:
            actions = warmup_actions(a_b, train.warmup_noise, rng, agent.mask.numpy())
        else:
            actions, _ = agent.act(feats, a_b, explore=True, rng=rng)
        rollout.step(actions, sink)
        bar.update(num_envs)
        env_steps = rollout.env_steps
        if env_steps >= train.warmup_steps:
            if not critic_warm:
                critic_warmup()
                critic_warm = True
            for _ in range(cfg.utd * num_envs):
                last_logs = agent.update(replay.sample(cfg.batch_size, rng))
        if train.realtime_hz > 0:  # a human in the loop sees the robot at its real rate
            tick += 1.0 / train.realtime_hz
            time.sleep(max(0.0, tick - time.perf_counter()))
        every = max(train.eval_every, 1)
        if env_steps // every != (env_steps - num_envs) // every:
            evaluate_now()
            if result.steps_to_target is not None:
                break
    bar.close()
    rollout.close()
    finish_run(result, kept, rollout.env_steps, start)
    return result


def freeze(base: Any) -> None:
    """Put the base in eval mode and stop its gradients (it is never trained here)."""
    base.eval()
    for p in getattr(base, "parameters", lambda: [])():
        p.requires_grad_(False)


def warmup_actions(
    a_b: np.ndarray, noise: float, rng: np.random.Generator, mask: np.ndarray | None = None
) -> np.ndarray:
    """(N, Da) base actions plus uniform noise of half-width ``noise`` (only where ``mask``
    (Da,) is 1: the residual's dimensions), clipped to [-1, 1]."""
    eps = rng.uniform(-noise, noise, a_b.shape)
    if mask is not None:
        eps = eps * mask
    return np.clip(a_b + eps, -1, 1).astype(np.float32)


def recent_episode_rates(episodes: Sequence[Mapping[str, float]], n: int = 20) -> dict[str, float]:
    """Success and intervention rate over the last ``n`` training episodes (0 if none)."""
    recent = episodes[-n:]
    if not recent:
        return {"train_success": 0.0, "intervention_rate": 0.0}
    return {
        "train_success": float(np.mean([e["success"] for e in recent])),
        "intervention_rate": float(np.mean([e["intervention_rate"] for e in recent])),
    }


class _UnionBuffer:
    """Samples several replay buffers as one, in proportion to their sizes."""

    def __init__(self, buffers: Sequence[ReplayBuffer]) -> None:
        self.buffers = list(buffers)
        self.obs_spec = self.buffers[0].obs_spec

    def __len__(self) -> int:
        return sum(len(b) for b in self.buffers)

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, Any]:
        sizes = np.array([len(b) for b in self.buffers], float)
        counts = rng.multinomial(batch_size, sizes / sizes.sum())
        parts = [b.sample(int(n), rng) for b, n in zip(self.buffers, counts, strict=True) if n]
        return concat_batches(parts)
