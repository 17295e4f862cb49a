"""Behavior-cloning training loop: AdamW with warm-up + cosine decay, an EMA copy of the
weights (used for evaluation and saved), validation loss, periodic rollouts in sim, metrics CSV
and a PNG of the curves. Works for any :class:`robotrl.types.ChunkPolicy`."""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from policies.base import Policy
from robotrl.metrics import MetricsLogger


@dataclass
class BCConfig:
    """Hyperparameters of :func:`train_bc`.

    Attributes:
        steps: gradient steps (at least 1). lr: peak learning rate. weight_decay: AdamW decay.
        warmup: linear warm-up steps. ema_decay: EMA of weights (0 disables).
        grad_clip: max gradient norm. eval_every: steps between sim evaluations (0: only at
        the end). log_every: steps between loss rows. seed: torch seed.
    """

    steps: int = 3000
    lr: float = 1e-3
    weight_decay: float = 1e-6
    warmup: int = 100
    ema_decay: float = 0.995
    grad_clip: float = 1.0
    eval_every: int = 1000
    log_every: int = 50
    seed: int = 0


def check_steps(steps: int) -> None:
    """Raise ValueError when ``steps`` trains nothing (fewer than one gradient step)."""
    if steps <= 0:
        raise ValueError(f"steps={steps} trains nothing: give steps >= 1, e.g. steps=3000")


def _lr_lambda(cfg: BCConfig) -> Callable[[int], float]:
    def f(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    return f


@torch.no_grad()
def _ema_update(ema: nn.Module, model: nn.Module, decay: float) -> None:
    torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 1.0 - decay)
    for e, b in zip(ema.buffers(), model.buffers(), strict=True):
        e.copy_(b)


@torch.no_grad()
def validation_loss(policy: Policy, loader: Any, max_batches: int = 20) -> float:
    policy.eval()
    losses = []
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(12345)  # same noise draws every time: comparable numbers
    for i, batch in enumerate(loader):
        if i >= max_batches:
            break
        losses.append(policy.compute_loss(batch)[0].item())
    torch.random.set_rng_state(gen_state)
    return float(sum(losses) / max(len(losses), 1))


def train_bc(
    policy: Policy,
    train_loader: Any,
    cfg: BCConfig,
    *,
    val_loader: Any | None = None,
    evaluate: Callable[[Policy], dict[str, float]] | None = None,
    logger: MetricsLogger | None = None,
    progress: bool = True,
    stop: threading.Event | None = None,
) -> tuple[Policy, dict[str, Any]]:
    """Train; returns ``(the EMA policy (or the policy if EMA is off) in eval mode, summary)``.

    ``evaluate(policy) -> {"success_rate": ...}`` runs every ``eval_every`` steps and at the end.
    The progress bar counts gradient steps; its postfix shows the phase (``train``, ``eval``),
    the latest loss and the latest success rate. Raises ValueError when ``cfg.steps`` < 1.
    ``stop``: once set, training ends after the current gradient step, without the final
    evaluation; the policy is returned as it is then and the summary says ``interrupted``.
    """
    check_steps(cfg.steps)
    torch.manual_seed(cfg.seed)
    policy.train()
    ema = copy.deepcopy(policy).eval() if cfg.ema_decay > 0 else None
    params = [p for p in policy.parameters() if p.requires_grad]
    # fused: one kernel per step over every tensor (CPU too), instead of a few per tensor
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg))
    start = time.perf_counter()
    step, evals, last_loss = 0, [], float("nan")
    bar = tqdm(total=cfg.steps, desc="train-bc", disable=not progress)
    postfix: dict[str, str] = {}

    def show(**values: str) -> None:
        postfix.update(values)
        bar.set_postfix(postfix)

    def run_eval() -> None:
        show(phase="eval")
        target = ema if ema is not None else policy
        row: dict[str, float] = {"step": step, "wall_s": time.perf_counter() - start}
        if val_loader is not None:
            row["val_loss"] = validation_loss(target, val_loader)
        if evaluate is not None:
            row.update(evaluate(target))
        evals.append(row)
        if logger is not None:
            logger.log(**row)
        if "success_rate" in row:
            postfix["success"] = f"{row['success_rate']:.2f}"
        show(phase="train" if step < cfg.steps else "done")
        policy.train()

    if len(train_loader) == 0:  # drop_last with fewer samples than a batch: no batch, ever
        raise ValueError(
            "the training loader yields no batch (fewer samples than one batch_size with "
            "drop_last): lower batch_size or add episodes"
        )
    show(phase="train")
    interrupted = False
    while step < cfg.steps and not interrupted:
        for batch in train_loader:
            loss, logs = policy.compute_loss(batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"non-finite BC loss at step {step}: {loss.item()}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip, foreach=True)
            opt.step()
            sched.step()
            if ema is not None:
                _ema_update(ema, policy, cfg.ema_decay)
            step += 1
            last_loss = logs["loss"]
            bar.update(1)
            if step % cfg.log_every == 0:
                show(loss=f"{last_loss:.4f}")
                if logger is not None:
                    logger.log(
                        step=step,
                        **logs,
                        lr=float(sched.get_last_lr()[0]),
                        wall_s=time.perf_counter() - start,
                    )
            if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.steps:
                run_eval()
            interrupted = stop is not None and stop.is_set() and step < cfg.steps
            if step >= cfg.steps or interrupted:
                break
    if not interrupted:
        run_eval()
    bar.close()
    final = ema if ema is not None else policy
    final.eval()
    summary = {
        "steps": step,
        "train_wall_s": round(time.perf_counter() - start, 2),
        "final_loss": last_loss,
        "evaluations": evals,
        "interrupted": interrupted,
    }
    return final, summary


def plot_training(logger: MetricsLogger, run_dir: Path) -> Path:
    """``training.png``: losses (log scale; the VLA's auxiliary loss too) and success rate."""
    return logger.plot(
        run_dir / "training.png",
        "step",
        [["loss", "val_loss", "aux_loss"], ["success_rate"]],
        titles=["BC loss", "sim success rate"],
        log_y={0: True},
    )
