"""Chunk-level rollouts of a flow policy in a vector env, storing what the learner needs to
recompute every log-probability exactly.

One decision samples a whole denoising chain (Flow-Noise: every step stochastic; Flow-SDE:
only step ``k*``, drawn per decision and stored) and executes the first Te actions of the
chunk; its reward is their sum. Envs run asynchronously at the chunk level (an episode that
ends mid-chunk starts a fresh chunk after its reset), so the vector env runs with autoreset
disabled and this class resets each finished env itself, with seeds from its own schedule:
``group_size`` consecutive episodes share one seed (one reset state), which is what GRPO groups.
Only finished episodes are handed out; an episode still running when :meth:`collect` returns
continues in the next call (its chunks keep the log-probs of the weights that sampled them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from robotrl.chunk_runner import LANGUAGE_KEY, policy_keys
from robotrl.safety_tally import SafetyTally

MODE_OF_ALGO = {"flow_noise": "noise_net", "flow_sde": "sde"}


@dataclass
class ChunkStep:
    """One chunk decision. ``obs``: {key: (To, ...)} (``language``: (L,) token ids);
    ``chain``: (K+1, Ta, Da) normalised; ``k_star``: the stochastic step (Flow-SDE, else -1);
    ``log_probs``: (K,) per-step log-probs at sampling time (0 at deterministic steps);
    ``features``: (F,) value-head input (values are computed by the learner, with its current
    head, when it builds a batch); ``reward``: sum over the executed actions."""

    obs: dict[str, np.ndarray]
    chain: np.ndarray
    k_star: int
    log_probs: np.ndarray
    features: np.ndarray
    reward: float = 0.0
    steps: int = 0


@dataclass
class FlowEpisode:
    """A finished episode: its chunk steps, outcome and (when truncated) the value-head input
    at the final observation for bootstrapping."""

    env_id: int
    seed: int
    group: int
    steps: list[ChunkStep] = field(default_factory=list)
    success: bool = False
    ret: float = 0.0
    length: int = 0
    terminated: bool = False
    final_features: np.ndarray | None = None


def value_features(policy: Any, obs: Mapping[str, torch.Tensor], x0: torch.Tensor) -> torch.Tensor:
    """(B, F + H) value-head input: observation features and the action expert's features at
    the first denoising step (t = 1, from ``x0`` (B, Ta, Da)), detached."""
    with torch.no_grad():
        cond = policy.encode(obs)
        _, feat = policy.net(x0, torch.ones(x0.shape[0], device=x0.device), cond)
        return torch.cat([cond, feat], dim=-1)


class FlowRollout:
    """Samples chains and steps ``venv`` (autoreset disabled, e.g.
    ``sim.make_vec(..., autoreset_mode=AutoresetMode.DISABLED)``).

    Args:
        policy: a flow policy (:class:`policies.flow_matching.FlowMatchingPolicy` or TinyVLA).
        venv: Gymnasium vector env with N envs.
        mode: ``"noise_net"`` (Flow-Noise) or ``"sde"`` (Flow-SDE, hybrid one-step).
        execute_horizon: Te actions executed per chunk.
        seed: first episode seed (episode seeds then count up, one per group).
        group_size: consecutive episodes sharing a reset seed (GRPO's G; 1 for PPO).
        noise_level: Flow-SDE ``a`` (None: the policy's).
    """

    def __init__(
        self,
        policy: Any,
        venv: Any,
        mode: str,
        execute_horizon: int,
        seed: int = 0,
        group_size: int = 1,
        noise_level: float | None = None,
    ) -> None:
        if mode not in ("noise_net", "sde"):
            raise ValueError(f"mode must be 'noise_net' or 'sde', got {mode!r}")
        if not 1 <= execute_horizon <= policy.action_horizon:
            raise ValueError(
                f"execute_horizon must be in [1, Ta={policy.action_horizon}], got {execute_horizon}"
            )
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.policy, self.venv, self.mode = policy, venv, mode
        self.te, self.group_size, self.noise_level = execute_horizon, group_size, noise_level
        self.n = venv.num_envs
        self.keys = policy_keys(policy)
        self.gen = torch.Generator().manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.env_steps = 0
        self.safety = SafetyTally()  # constraint violations of the training steps
        self._next_seed, self._seed0 = 0, seed
        self.history: list[deque[dict[str, np.ndarray]]] = [
            deque(maxlen=policy.obs_horizon) for _ in range(self.n)
        ]
        self.queues: list[deque[np.ndarray]] = [deque() for _ in range(self.n)]
        self.current: list[FlowEpisode | None] = [None] * self.n
        self.pending: dict[int, list[FlowEpisode]] = {}  # group -> finished episodes
        seeds = [self._take_seed() for _ in range(self.n)]
        obs, _ = venv.reset(seed=[s for s, _ in seeds])
        for i, (s, g) in enumerate(seeds):
            self._start(i, s, g, {k: v[i] for k, v in obs.items()})
        x0 = torch.zeros((1, policy.action_horizon, policy.action_dim))
        probe = {k: torch.from_numpy(v[:1]) for k, v in self._stack([0]).items()}
        self.feature_dim = int(value_features(policy, probe, x0).shape[1])  # F of ChunkStep

    # ------------------------------------------------------------------ bookkeeping
    def _take_seed(self) -> tuple[int, int]:
        group = self._next_seed // self.group_size
        self._next_seed += 1
        return self._seed0 + group, group

    def _start(self, i: int, seed: int, group: int, obs: Mapping[str, Any]) -> None:
        self.history[i].clear()
        self.queues[i].clear()
        self._push(i, obs)
        self.current[i] = FlowEpisode(env_id=i, seed=seed, group=group)

    def _push(self, i: int, obs: Mapping[str, Any]) -> None:
        entry = {k: np.asarray(obs[k]) for k in self.keys}
        if not self.history[i]:
            self.history[i].extend([entry] * self.policy.obs_horizon)
        else:
            self.history[i].append(entry)

    def _stack(self, ids: list[int]) -> dict[str, np.ndarray]:
        """{key: (len(ids), To, ...)}; ``language``: (len(ids), L) token ids."""
        out = {
            k: np.stack([np.stack([h[k] for h in self.history[i]]) for i in ids])
            for k in self.keys
            if k != LANGUAGE_KEY
        }
        if LANGUAGE_KEY in self.keys:
            texts = [str(self.history[i][-1][LANGUAGE_KEY]) for i in ids]
            out[LANGUAGE_KEY] = self.policy.tokenizer.encode_batch(texts)[0]
        return out

    # ------------------------------------------------------------------ acting
    def _decide(self, ids: list[int]) -> None:
        obs_np = self._stack(ids)
        obs = {k: torch.from_numpy(v) for k, v in obs_np.items()}
        k = self.policy.num_steps
        k_star = (
            torch.randint(0, k, (len(ids),), generator=self.gen) if self.mode == "sde" else None
        )
        with torch.no_grad():
            out = self.policy.sample_chain(
                obs, mode=self.mode, k_star=k_star, noise_level=self.noise_level, generator=self.gen
            )
            feats = torch.cat([out["obs_features"], out["expert_features"]], dim=-1)
        logp = out["log_prob"].numpy()
        chain = out["chain"].numpy()
        actions = out["action"].numpy()
        for j, i in enumerate(ids):
            ep = self.current[i]
            assert ep is not None  # every env always has a running episode
            ep.steps.append(
                ChunkStep(
                    obs={key: v[j] for key, v in obs_np.items()},
                    chain=chain[j],
                    k_star=int(k_star[j]) if k_star is not None else -1,
                    log_probs=logp[j],
                    features=feats[j].numpy(),
                )
            )
            self.queues[i].extend(actions[j, : self.te])

    def collect(
        self, min_env_steps: int, on_step: Callable[[int], Any] | None = None
    ) -> list[list[FlowEpisode]]:
        """Step the envs for at least ``min_env_steps`` env steps (summed over envs); return
        the groups (lists of ``group_size`` episodes) that finished, oldest first.
        ``on_step(n)`` is called after every vector step with its ``n`` env steps (e.g. a
        progress bar's ``update``)."""
        done_groups: list[list[FlowEpisode]] = []
        taken = 0
        while taken < min_env_steps:
            need = [i for i in range(self.n) if not self.queues[i]]
            if need:
                self._decide(need)
            actions = np.stack([self.queues[i].popleft() for i in range(self.n)])
            obs, reward, term, trunc, info = self.venv.step(actions.astype(np.float32))
            self.safety.add(info)
            success = np.asarray(info.get("success", np.zeros(self.n, bool)), bool)
            taken += self.n
            self.env_steps += self.n
            if on_step is not None:
                on_step(self.n)
            ended: list[int] = []
            for i in range(self.n):
                ep = self.current[i]
                assert ep is not None
                step = ep.steps[-1]
                step.reward += float(reward[i])
                step.steps += 1
                ep.ret += float(reward[i])
                ep.length += 1
                ep.success |= bool(success[i])
                self._push(i, {k: v[i] for k, v in obs.items()})
                if term[i] or trunc[i]:
                    ep.terminated = bool(term[i])
                    ended.append(i)
            if not ended:
                continue
            trunc_ids = [i for i in ended if not term[i]]
            if trunc_ids:  # bootstrap on truncation: features at the final observation
                fobs = {k: torch.from_numpy(v) for k, v in self._stack(trunc_ids).items()}
                x0 = torch.randn(
                    (len(trunc_ids), self.policy.action_horizon, self.policy.action_dim),
                    generator=self.gen,
                )
                ff = value_features(self.policy, fobs, x0).numpy()
                for j, i in enumerate(trunc_ids):
                    ep = self.current[i]
                    assert ep is not None
                    ep.final_features = ff[j]
            mask = np.zeros(self.n, bool)
            mask[ended] = True
            starts = {i: self._take_seed() for i in ended}
            seeds = [starts[i][0] if i in starts else None for i in range(self.n)]
            obs, _ = self.venv.reset(seed=seeds, options={"reset_mask": mask})
            for i in ended:
                ep = self.current[i]
                assert ep is not None
                group = self.pending.setdefault(ep.group, [])
                group.append(ep)
                if len(group) == self.group_size:
                    done_groups.append(self.pending.pop(ep.group))
                self._start(i, *starts[i], {k: v[i] for k, v in obs.items()})
        return done_groups

    def close(self) -> None:
        self.venv.close()
