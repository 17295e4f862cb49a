"""Do a residual run's critics rank actions? (``bench/critic_ranking.py`` prints the JSON.)

At every step a :class:`CandidateChoice` offers ``K`` residuals: the actor's own and ``K - 1``
draws of ``N(0, sigma^2)`` around it (on the residual's dimensions, clipped to its bound), and
executes one: at random (rule ``random``) or the one with the highest mean Q over the critic
heads (rule ``critic``). Where the critics know which actions are better at a state, ``critic``
beats ``random`` at the same sigma.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

import sim
from robotrl.algos.residual import ResidualAgent
from robotrl.algos.residual_policy import ResidualPolicy
from robotrl.evaluation import evaluate

RULES = ("random", "critic")


class CandidateChoice:
    """One env's ``EpisodePolicy``: ``candidates`` residuals around the actor's, one executed.

    Args:
        policy: the trained residual on its base. sigma: std of the candidates' perturbation
            [action units]. candidates: K >= 1 (candidate 0 is the actor's residual).
        rule: ``"critic"`` (highest mean Q over the heads) or ``"random"``. seed: the draws'.
    """

    def __init__(
        self, policy: ResidualPolicy, sigma: float, candidates: int, rule: str, seed: int = 0
    ) -> None:
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        if candidates < 1 or sigma < 0:
            raise ValueError(f"need candidates >= 1 and sigma >= 0, got {candidates}, {sigma}")
        if not isinstance(policy.agent, ResidualAgent):
            raise ValueError("candidates are ranked by critics: give an algo=residual checkpoint")
        self.agent: ResidualAgent = policy.agent
        self.policy, self.sigma, self.k, self.rule = policy, sigma, candidates, rule
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        self.policy.reset()

    @torch.no_grad()
    def candidates(self, obs: Mapping[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """Features (1, O) and the K executable actions (K, A) at one observation; advances
        the base's chunk queue by one step."""
        batch = {k: np.asarray(v)[None] for k, v in obs.items()}
        agent = self.agent
        feats = torch.from_numpy(self.policy.featurizer(batch))
        base = torch.from_numpy(self.policy.chunks.act(batch).astype(np.float32))  # (1, A)
        draws = self.rng.normal(0.0, self.sigma, (self.k, agent.act_dim)).astype(np.float32)
        draws[0] = 0.0
        scale = agent.cfg.scale
        res = (agent.residual(feats, base) + torch.from_numpy(draws) * agent.mask).clamp(
            -scale, scale
        )
        return feats, (base + res).clamp(-1.0, 1.0)

    @torch.no_grad()
    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        feats, actions = self.candidates(obs)
        if self.rule == "critic":
            q = self.agent.critic(feats.expand(self.k, -1), actions).mean(dim=0)  # (K,)
            return actions[int(q.argmax())].numpy()
        return actions[int(self.rng.integers(self.k))].numpy()


def critic_ranking(
    policy: ResidualPolicy,
    task: str,
    env_kwargs: Mapping[str, Any],
    *,
    episodes: int,
    seed: int,
    candidates: int,
    sigmas: list[float],
) -> dict[str, Any]:
    """Success of ``policy`` alone and of both rules at each sigma, on episodes ``seed + i``."""
    env = sim.make(task, **env_kwargs)
    try:

        def rate(p: Any) -> float:
            return evaluate(env, p, episodes, seed=seed, progress=False).success_rate

        out: dict[str, Any] = {"policy": rate(policy)}
        for sigma in sigmas:
            out[f"sigma={sigma}"] = {
                rule: rate(CandidateChoice(policy, sigma, candidates, rule, seed)) for rule in RULES
            }
        return out
    finally:
        env.close()
