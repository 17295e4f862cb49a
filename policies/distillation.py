"""One-step distillation of a K-step flow or diffusion policy (the RL-100 consistency head).

The student maps the teacher's initial noise straight to the end of the teacher's deterministic
chain: ``x_K = S(x_0, o)``, trained by MSE against the teacher's K-step output for the SAME
``x_0`` and observation (so the map it learns is a function, not a distribution; the student
stays as multi-modal as the teacher because different noise still lands in different modes).
One network evaluation per chunk instead of K.

Design:
- Parameterisation ``S(x_0, o) = x_0 - f(x_0, t=1, o)`` with ``f`` a
  :class:`~policies.denoiser.ChunkDenoiser`. Initialised from a flow teacher's velocity net,
  the student starts as the teacher run with K = 1 (one Euler step of size 1), so distillation
  only has to correct the curvature the K-step chain integrates. For a diffusion teacher the
  net's weights are copied too (the features transfer; the output head relearns).
- The observation encoder and normaliser are copied from the teacher and FROZEN by default:
  the teacher's chain is a deterministic function of ``(x_0, teacher features)``, so the frozen
  features already carry everything the target depends on; freezing halves the trainable
  parameters, keeps the student's features identical to the teacher's (RL heads trained on
  them stay valid) and cannot drift on observations the distillation batches never visited.
  ``train_encoder=True`` fine-tunes them instead.
- The student is self-contained: its checkpoint needs no teacher to run.

Shape letters as in :mod:`robotrl.types`.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch
from tqdm.auto import tqdm

from policies.base import Policy, constructor_config
from policies.denoiser import ChunkDenoiser
from policies.diffusion import DiffusionPolicy
from policies.encoders import ObsEncoder
from policies.flow_matching import FlowMatchingPolicy
from policies.normalizer import Normalizer

if TYPE_CHECKING:  # the teachers' types only: importing diffusion pulls in diffusers
    Teacher = FlowMatchingPolicy | DiffusionPolicy

TEACHER_TYPES = ("flow", "diffusion")


class DistilledPolicy(Policy):
    """One-step student of a chunked flow / diffusion teacher.

    Args:
        state_dims, action_dim, image_keys, obs_horizon, action_horizon, hidden, depth,
            obs_feature_dim, image_feature_dim, stats: as in
            :class:`policies.flow_matching.FlowMatchingPolicy` (they must equal the teacher's).
        teacher_type: ``"flow"`` or ``"diffusion"`` (recorded; decides nothing at inference).
        teacher_steps: the teacher's K (recorded for reports).
    """

    policy_type = "distilled"
    num_steps = 1

    def __init__(
        self,
        state_dims: Mapping[str, int],
        action_dim: int = 7,
        image_keys: Sequence[str] = (),
        obs_horizon: int = 2,
        action_horizon: int = 16,
        hidden: int = 256,
        depth: int = 3,
        obs_feature_dim: int = 256,
        image_feature_dim: int = 64,
        teacher_type: str = "flow",
        teacher_steps: int = 10,
        stats: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        if teacher_type not in TEACHER_TYPES:
            raise ValueError(f"teacher_type must be one of {TEACHER_TYPES}, got {teacher_type!r}")
        if obs_horizon < 1 or action_horizon < 1 or action_dim < 1 or teacher_steps < 1:
            raise ValueError("obs_horizon, action_horizon, action_dim, teacher_steps must be >= 1")
        self.config = constructor_config(DistilledPolicy, locals())
        self.obs_horizon, self.action_horizon, self.action_dim = (
            obs_horizon,
            action_horizon,
            action_dim,
        )
        self.normalizer = Normalizer.for_policy(state_dims, action_dim, stats)
        self.encoder = ObsEncoder(
            state_dims, image_keys, obs_horizon, obs_feature_dim, image_feature_dim
        )
        self.net = ChunkDenoiser(action_dim, action_horizon, obs_feature_dim, hidden, depth)

    @classmethod
    def from_teacher(cls, teacher: Teacher) -> DistilledPolicy:
        """A student with the teacher's normaliser, encoder and network weights copied."""
        t_type = getattr(teacher, "policy_type", None)
        if t_type not in TEACHER_TYPES:
            raise ValueError(f"teacher must be a {TEACHER_TYPES} policy, got {t_type!r}")
        tc = teacher.config
        student = cls(
            state_dims=tc["state_dims"],
            action_dim=tc["action_dim"],
            image_keys=tc["image_keys"],
            obs_horizon=tc["obs_horizon"],
            action_horizon=tc["action_horizon"],
            hidden=tc["hidden"],
            depth=tc["depth"],
            obs_feature_dim=tc["obs_feature_dim"],
            image_feature_dim=tc["image_feature_dim"],
            teacher_type=t_type,
            teacher_steps=int(teacher.num_steps),
        )
        student.normalizer.load_state_dict(teacher.normalizer.state_dict())
        student.encoder.load_state_dict(teacher.encoder.state_dict())
        student.net.load_state_dict(teacher.net.state_dict())
        return student.to(next(teacher.parameters()).device)

    # ------------------------------------------------------------------ ChunkPolicy
    def reset(self) -> None:
        """Stateless: nothing to forget."""

    def encode(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """(B, F) observation features."""
        return self.encoder(obs, self.normalizer)

    def _chunk_shape(self, b: int) -> tuple[int, int, int]:
        return (b, self.action_horizon, self.action_dim)

    def one_step(self, noise: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """Normalised chunk (B, Ta, Da) from noise ``x_0`` (B, Ta, Da) and features (B, F):
        exactly one network evaluation."""
        t = torch.ones(noise.shape[0], device=noise.device)  # t = 1: pure noise (pi0 convention)
        out, _ = self.net(noise, t, cond)
        return noise - out

    def compute_loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """Distillation MSE in normalised action space.

        ``batch`` holds ``obs``, ``noise`` (B, Ta, Da) and ``target`` (B, Ta, Da): the
        teacher's normalised chunk from that noise (see :func:`teacher_target`)."""
        if "noise" not in batch or "target" not in batch:
            raise ValueError(
                "a distillation batch needs 'noise' and 'target' (the teacher's normalised "
                f"chunk from that noise), got keys {sorted(batch)}; use policies.distillation."
                "distill"
            )
        cond = self.encode(batch["obs"])
        noise, target = batch["noise"].float(), batch["target"].float()
        if noise.shape != self._chunk_shape(cond.shape[0]) or target.shape != noise.shape:
            raise ValueError(
                f"noise and target must be {self._chunk_shape(cond.shape[0])}, got "
                f"{tuple(noise.shape)} and {tuple(target.shape)}"
            )
        loss = torch.mean((self.one_step(noise, cond) - target) ** 2)
        return loss, {"loss": float(loss.detach())}

    @torch.no_grad()
    def predict_chunk(
        self,
        obs: Mapping[str, torch.Tensor],
        noise: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """(B, Ta, Da) env actions in [-1, 1] from one network evaluation."""
        cond = self.encode(obs)
        shape = self._chunk_shape(cond.shape[0])
        x0 = (
            noise
            if noise is not None
            else torch.randn(shape, generator=generator, device=cond.device)
        )
        if x0.shape != shape:
            raise ValueError(f"noise must be {shape}, got {tuple(x0.shape)}")
        x = self.one_step(x0, cond)
        return self.normalizer.unnormalize("action", x).clamp(-1.0, 1.0)


@torch.no_grad()
def teacher_target(
    teacher: Teacher, obs: Mapping[str, torch.Tensor], noise: torch.Tensor
) -> torch.Tensor:
    """The teacher's deterministic chunk from ``noise`` (B, Ta, Da), in normalised units.

    Flow: the ODE chain's end (unclamped). Diffusion: DDIM (eta = 0) output, normalised back.
    """
    if getattr(teacher, "policy_type", None) == "flow":
        flow = cast("FlowMatchingPolicy", teacher)
        return flow.sample_chain(obs, noise=noise, mode="ode")["chain"][:, -1]
    return teacher.normalizer.normalize("action", teacher.predict_chunk(obs, noise=noise))


@dataclass
class DistillConfig:
    """Hyperparameters of :func:`distill`.

    Attributes:
        steps: gradient steps. lr: peak AdamW learning rate (cosine decay after ``warmup``).
        warmup: linear warm-up steps. weight_decay: AdamW decay. grad_clip: max grad norm.
        train_encoder: fine-tune the copied encoder (default frozen; see the module doc).
        log_every: steps between logged rows. seed: torch seed (noise draws).
    """

    steps: int = 2000
    lr: float = 3e-4
    warmup: int = 50
    weight_decay: float = 1e-6
    grad_clip: float = 1.0
    train_encoder: bool = False
    log_every: int = 50
    seed: int = 0


def _lr_lambda(cfg: DistillConfig) -> Callable[[int], float]:
    def f(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    return f


@torch.no_grad()
def match_error(
    student: DistilledPolicy,
    teacher: Teacher,
    batches: Iterable[Mapping[str, Any]],
    max_batches: int = 10,
    seed: int = 12345,
) -> float:
    """Mean squared student-teacher gap in normalised action units over fixed noise draws."""
    gen = torch.Generator().manual_seed(seed)
    errs = []
    for i, batch in enumerate(batches):
        if i >= max_batches:
            break
        obs = batch["obs"]
        b = next(iter(obs.values())).shape[0]
        noise = torch.randn(student._chunk_shape(b), generator=gen)
        target = teacher_target(teacher, obs, noise)
        errs.append(float(torch.mean((student.one_step(noise, student.encode(obs)) - target) ** 2)))
    return float(sum(errs) / max(len(errs), 1))


def distill(
    teacher: Teacher,
    dataset_loader: Iterable[Mapping[str, Any]],
    steps: int | None = None,
    cfg: DistillConfig | None = None,
    *,
    student: DistilledPolicy | None = None,
    log: Callable[[dict[str, float]], None] | None = None,
    progress: bool = True,
) -> tuple[DistilledPolicy, dict[str, Any]]:
    """Train a one-step student to reproduce ``teacher``'s K-step chunks.

    Args:
        teacher: a flow or diffusion policy (kept frozen, eval mode).
        dataset_loader: yields ``{"obs": {...}, ...}`` batches (only observations are used:
            the targets are the teacher's outputs, not the demos' actions). Re-iterated as
            needed.
        steps: gradient steps (overrides ``cfg.steps``).
        student: start from this student (default :meth:`DistilledPolicy.from_teacher`).
        log: called with ``{"step", "loss", "lr", "wall_s"}`` every ``cfg.log_every`` steps.

    Returns:
        ``(student in eval mode, summary)`` with ``steps``, ``final_loss``, ``train_wall_s``.
    """
    cfg = copy.copy(cfg) if cfg is not None else DistillConfig()
    if steps is not None:
        cfg.steps = int(steps)
    if cfg.steps < 1:
        raise ValueError(f"steps must be >= 1, got {cfg.steps}")
    torch.manual_seed(cfg.seed)
    teacher.eval()  # its targets are computed under no_grad: it never trains
    student = student if student is not None else DistilledPolicy.from_teacher(teacher)
    student.train()
    student.encoder.requires_grad_(cfg.train_encoder)
    if not cfg.train_encoder:
        student.encoder.eval()  # frozen: no augmentation, same features as the teacher
    params = [p for p in student.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg))
    start = time.perf_counter()
    step, last = 0, float("nan")
    bar = tqdm(total=cfg.steps, desc="distill", disable=not progress)
    while step < cfg.steps:
        seen = False
        for batch in dataset_loader:
            seen = True
            obs = batch["obs"]
            b = next(iter(obs.values())).shape[0]
            noise = torch.randn(student._chunk_shape(b))
            target = teacher_target(teacher, obs, noise)
            loss, logs = student.compute_loss({"obs": obs, "noise": noise, "target": target})
            if not torch.isfinite(loss):
                raise FloatingPointError(f"non-finite distillation loss at step {step}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            opt.step()
            sched.step()
            step += 1
            last = logs["loss"]
            bar.update(1)
            if log is not None and step % cfg.log_every == 0:
                log(
                    {
                        "step": step,
                        "loss": last,
                        "lr": float(sched.get_last_lr()[0]),
                        "wall_s": time.perf_counter() - start,
                    }
                )
            if step >= cfg.steps:
                break
        if not seen:
            raise ValueError("dataset_loader yielded no batches")
    bar.close()
    student.eval()
    summary = {
        "steps": step,
        "final_loss": last,
        "train_wall_s": round(time.perf_counter() - start, 2),
    }
    return student, summary
