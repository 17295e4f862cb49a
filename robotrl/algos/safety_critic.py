"""Safety-reflex risk critic (Bresa, building on Recovery RL; docs/algorithms.md).

Q_risk(s, a) estimates the discounted probability that a constraint is violated (contact force
above the limit, the TCP leaving the workspace, a joint limit; see
:mod:`controllers.constraint_cost`) if action ``a`` is taken in ``s`` and the behaviour that
produced the data continues. Two critics, each an MLP with a sigmoid output, trained by

    y = c + (1 - c) * (1 - done) * gamma_safe * max(Q1', Q2')(s', a'),   c in {0, 1}
    loss = BCE(Q_i(s, a), y)  for i = 1, 2

(a violation ends the risk episode: y = 1; the max over the two target critics is the
pessimistic choice; ``a'`` is the action actually taken next, so Q is the behaviour's risk).
Pre-trained offline on transitions of scripted risky behaviour
(:func:`robotrl.algos.risk_data.pretrain_critic`), then updated online from the transitions
the reflex-guarded env reports (:class:`robotrl.algos.online_risk.OnlineRiskLearner`).
:meth:`SafetyCritic.export` writes numpy weights (``.npz``) that
:class:`controllers.reflex.RiskMLP` evaluates in the control loop without torch.

Shapes: B batch, O reflex features (:data:`sim.safety_guard.FEATURES`), A = 7 actions.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from controllers.reflex import SLOW_MIN
from robotrl.datasets.replay_buffer import ReplayBuffer

EXPORT_VERSION = 1


@dataclass
class SafetyCriticConfig:
    """Hyperparameters of the risk critic.

    Attributes:
        hidden, layers: MLP width and hidden layers (small: it runs at the control rate).
        gamma_safe: discount of the violation probability per policy step (0.8 at 20 Hz looks
            ~0.25 s ahead, the time a full-speed approach needs to stop).
        lr: Adam learning rate. tau: Polyak rate of the target critics.
        batch_size: transitions per update. grad_clip: max gradient norm.
        threshold: eps_safe, the risk above which the reflex intervenes (exported with it).
        soft_threshold: eps_soft < eps_safe, above which the reflex slows the command in
            proportion to the risk (exported; 0: no slowing zone).
        slow_min: the slowing zone's speed limit at eps_safe [action units] (exported).
    """

    hidden: int = 64
    layers: int = 2
    gamma_safe: float = 0.8
    lr: float = 1e-3
    tau: float = 0.01
    batch_size: int = 256
    grad_clip: float = 1.0
    threshold: float = 0.3
    soft_threshold: float = 0.0
    slow_min: float = SLOW_MIN


def _mlp(in_dim: int, hidden: int, layers: int) -> nn.Sequential:
    mods: list[nn.Module] = []
    d = in_dim
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.ReLU()]
        d = hidden
    mods.append(nn.Linear(d, 1))
    return nn.Sequential(*mods)


class RiskCritics(nn.Module):
    """Two Q_risk logit networks on standardised features and raw actions."""

    mean: torch.Tensor  # buffers (register_buffer)
    std: torch.Tensor

    def __init__(self, obs_dim: int, act_dim: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(obs_dim))
        self.register_buffer("std", torch.ones(obs_dim))
        self.q1 = _mlp(obs_dim + act_dim, hidden, layers)
        self.q2 = _mlp(obs_dim + act_dim, hidden, layers)

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """(2, B) logits for obs (B, O) and actions (B, A)."""
        x = torch.cat([(obs - self.mean) / self.std, act], dim=-1)
        return torch.stack([self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)])


def risk_buffer(capacity: int, obs_dim: int, act_dim: int) -> ReplayBuffer:
    """A 1-step replay buffer of risk transitions: obs ``{"features": (O,), "act": (A,)}``
    (``next_obs["act"]`` is a'), action a, reward = cost c, terminated = violation or end."""
    spec = {"features": ((obs_dim,), np.float32), "act": ((act_dim,), np.float32)}
    return ReplayBuffer(capacity, spec, act_dim, n_step=1, gamma=1.0)


class SafetyCritic:
    """Risk critic with its optimiser, target critics and export (see module docstring).

    Args:
        obs_dim: O. act_dim: A. cfg: hyperparameters. feature_names: names of the O features
            (stored in the export so the runtime can check it computes the same ones).
        seed: torch seed of the initial weights.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        cfg: SafetyCriticConfig | None = None,
        feature_names: Iterable[str] = (),
        seed: int = 0,
    ) -> None:
        if obs_dim < 1 or act_dim < 1:
            raise ValueError(f"expected obs_dim, act_dim >= 1, got {obs_dim}, {act_dim}")
        self.cfg = cfg or SafetyCriticConfig()
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.feature_names = list(feature_names)
        torch.manual_seed(seed)
        c = self.cfg
        self.net = RiskCritics(obs_dim, act_dim, c.hidden, c.layers)
        self.target = copy.deepcopy(self.net).requires_grad_(False)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=c.lr)
        self.updates = 0

    def set_normalization(self, features: np.ndarray) -> None:
        """Standardise inputs by the mean / std of ``features`` (N, O) (e.g. the offline data)."""
        f = np.asarray(features, np.float64)
        mean, std = f.mean(0), np.maximum(f.std(0), 1e-3)
        for net in (self.net, self.target):
            net.mean.copy_(torch.as_tensor(mean, dtype=torch.float32))
            net.std.copy_(torch.as_tensor(std, dtype=torch.float32))

    def update(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """One gradient step on a batch of :func:`risk_buffer` (``sample`` output)."""
        c = self.cfg
        obs = torch.as_tensor(batch["obs"]["features"])
        act = torch.as_tensor(batch["action"])
        cost = torch.as_tensor(batch["reward"])
        done = torch.as_tensor(batch["terminated"], dtype=torch.float32)
        with torch.no_grad():
            nxt = torch.sigmoid(
                self.target(
                    torch.as_tensor(batch["next_obs"]["features"]),
                    torch.as_tensor(batch["next_obs"]["act"]),
                )
            ).amax(0)  # pessimistic: the larger of the two risks
            y = cost + (1.0 - cost) * (1.0 - done) * c.gamma_safe * nxt
        logits = self.net(obs, act)
        loss = nn.functional.binary_cross_entropy_with_logits(logits, y.expand_as(logits))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), c.grad_clip)
        self.opt.step()
        with torch.no_grad():
            for p, tp in zip(self.net.parameters(), self.target.parameters(), strict=True):
                tp.lerp_(p, c.tau)
        self.updates += 1
        return {"risk_loss": loss.item(), "risk_target_mean": y.mean().item()}

    def fit(
        self, buffer: ReplayBuffer, updates: int, rng: np.random.Generator, progress: bool = True
    ) -> dict[str, float]:
        """``updates`` gradient steps on uniform batches of ``buffer``; the last logs."""
        logs: dict[str, float] = {}
        for _ in tqdm(range(updates), desc="risk critic", disable=not progress, leave=False):
            logs = self.update(buffer.sample(self.cfg.batch_size, rng))
        return logs

    @torch.no_grad()
    def risk(self, features: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """(B,) max(Q1, Q2) in [0, 1] for features (B, O) and actions (B, A)."""
        logits = self.net(
            torch.as_tensor(np.asarray(features, np.float32)),
            torch.as_tensor(np.asarray(actions, np.float32)),
        )
        return torch.sigmoid(logits).amax(0).numpy()

    def weights(self) -> dict[str, np.ndarray]:
        """Numpy weights in the layout :class:`controllers.reflex.RiskMLP` reads."""
        out: dict[str, np.ndarray] = {
            "mean": self.net.mean.numpy().astype(np.float64),
            "std": self.net.std.numpy().astype(np.float64),
            "threshold": np.array(self.cfg.threshold),
            "soft_threshold": np.array(self.cfg.soft_threshold),
            "slow_min": np.array(self.cfg.slow_min),
            "version": np.array(EXPORT_VERSION),
            "act_dim": np.array(self.act_dim),
            "feature_names": np.array(self.feature_names, dtype=str),
        }
        for h, q in (("q1", self.net.q1), ("q2", self.net.q2)):
            linears = [m for m in q if isinstance(m, nn.Linear)]
            for i, lin in enumerate(linears):
                # stored (in, out) so the runtime computes x @ W + b
                out[f"{h}.w{i}"] = lin.weight.detach().numpy().T.astype(np.float64).copy()
                out[f"{h}.b{i}"] = lin.bias.detach().numpy().astype(np.float64).copy()
        return out

    def export(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`weights` to ``path`` (``.npz``, no pickle); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **cast(dict[str, Any], self.weights()))  # no object arrays: no pickle
        return path

    @classmethod
    def from_export(
        cls, path: str | os.PathLike[str], cfg: SafetyCriticConfig | None = None
    ) -> SafetyCritic:
        """A critic with the weights of an exported ``.npz`` (to continue training online);
        ``cfg`` supplies the training hyperparameters (threshold and sizes come from the file).
        """
        with np.load(Path(path), allow_pickle=False) as z:
            w = {k: z[k] for k in z.files}
        layers = sum(1 for k in w if k.startswith("q1.w")) - 1
        hidden = int(w["q1.w0"].shape[1])
        obs_dim, act_dim = int(w["mean"].shape[0]), int(w["act_dim"])
        base = cfg or SafetyCriticConfig()
        cfg = SafetyCriticConfig(
            **{
                **asdict(base),
                "hidden": hidden,
                "layers": layers,
                "threshold": float(w["threshold"]),
                "soft_threshold": float(w.get("soft_threshold", 0.0)),
                "slow_min": float(w.get("slow_min", SLOW_MIN)),
            }
        )
        critic = cls(obs_dim, act_dim, cfg, feature_names=[str(x) for x in w["feature_names"]])
        with torch.no_grad():
            for net in (critic.net, critic.target):
                net.mean.copy_(torch.as_tensor(w["mean"]))
                net.std.copy_(torch.as_tensor(w["std"]))
                for h, q in (("q1", net.q1), ("q2", net.q2)):
                    linears = [m for m in q if isinstance(m, nn.Linear)]
                    for i, lin in enumerate(linears):
                        lin.weight.copy_(torch.as_tensor(w[f"{h}.w{i}"].T))
                        lin.bias.copy_(torch.as_tensor(w[f"{h}.b{i}"]))
        return critic
