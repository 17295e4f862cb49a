"""Training, threshold choice and held-out metrics of the success reward classifier.

Reads top to bottom: :func:`train_reward_classifier` draws class-balanced batches from the
labelled training frames, keeps the weights with the best validation average precision, then
:func:`select_threshold` picks the decision threshold on validation frames and
:func:`frame_metrics` / :func:`episode_metrics` score held-out episodes.

Validation and test frames are scored on their natural class balance (all frames of the
held-out episodes, not the 2-3x negative sampling of training): that is the mix the reward sees
in an RL episode, and precision depends on it.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from robotrl.algos.reward_classifier import MIN_THRESHOLD, RewardClassifier
from robotrl.algos.reward_labels import NEGATIVE, POSITIVE, Frames, balanced_batch

EVAL_BATCH = 512  # frames per forward pass when scoring


@dataclass
class RewardTrainConfig:
    """Hyperparameters of :func:`train_reward_classifier`."""

    steps: int = 1500  # gradient steps
    batch_size: int = 64
    lr: float = 3e-4  # Adam
    weight_decay: float = 1e-4  # AdamW
    neg_ratio: float = 2.5  # negatives per positive in each batch (HIL-SERL: 2-3x)
    eval_every: int = 250  # steps between validation scores (best-AP weights are kept)
    patience: int = 2  # validations without a better AP before stopping (0: never early)
    train_encoder: bool = True  # False: the CNNs stay fixed, only the head learns
    seed: int = 0


def score(model: RewardClassifier, frames: Frames) -> np.ndarray:
    """(N,) success probabilities of every frame (eval mode, batched)."""
    out = [
        model.predict_proba(frames.subset(np.arange(i, min(i + EVAL_BATCH, len(frames)))))
        for i in range(0, len(frames), EVAL_BATCH)
    ]
    return np.concatenate(out) if out else np.zeros(0)


def average_precision(probs: np.ndarray, labels: np.ndarray) -> float:
    """Area under the precision-recall curve (step-wise, as sklearn's); ignored frames dropped."""
    keep = labels != -1
    p, y = probs[keep], labels[keep] == POSITIVE
    if not y.any():
        return float("nan")
    order = np.argsort(-p, kind="stable")
    tp = np.cumsum(y[order])
    precision = tp / np.arange(1, len(order) + 1)
    return float(np.sum(precision[y[order]]) / y.sum())


def train_reward_classifier(
    model: RewardClassifier,
    train: Frames,
    val: Frames | None,
    cfg: RewardTrainConfig,
    log: Callable[..., None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Fit ``model`` in place on ``train`` frames; returns a summary (best val AP, wall time).

    ``log(step=..., loss=..., val_ap=...)`` receives scalars; ``progress(n)`` advances a bar.
    """
    if cfg.steps < 1 or cfg.batch_size < 2:
        raise ValueError(f"need steps >= 1 and batch_size >= 2, got {cfg.steps}, {cfg.batch_size}")
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    model.requires_grad_(True)
    if not cfg.train_encoder:
        model.encoders.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.patience < 0:
        raise ValueError(f"patience must be >= 0, got {cfg.patience}")
    best_ap, best_state, best_step, stale = -1.0, None, 0, 0
    t0 = time.perf_counter()
    step = 0
    for step in range(1, cfg.steps + 1):
        model.train()
        idx = balanced_batch(train.labels, cfg.batch_size, cfg.neg_ratio, rng)
        batch = {k: torch.from_numpy(v) for k, v in train.subset(idx).items()}
        target = torch.from_numpy((train.labels[idx] == POSITIVE).astype(np.float32))
        loss = F.binary_cross_entropy_with_logits(model(batch), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if progress is not None:
            progress(1)
        row: dict[str, float] = {"step": step, "loss": loss.item()}
        if val is not None and (step % cfg.eval_every == 0 or step == cfg.steps):
            row["val_ap"] = average_precision(score(model, val), val.labels)
            if row["val_ap"] > best_ap:  # keep the best weights, not the last
                best_ap, best_step, stale = row["val_ap"], step, 0
                best_state = copy.deepcopy(model.state_dict())
            else:
                stale += 1
        if log is not None and (step % 10 == 0 or "val_ap" in row):
            log(**row)
        # early stop: a perfect validation AP cannot improve, nor one stuck for `patience`
        if cfg.patience and "val_ap" in row and (best_ap >= 1.0 or stale >= cfg.patience):
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.freeze()
    return {
        "train_s": time.perf_counter() - t0,
        "best_val_ap": best_ap if best_state is not None else None,
        "best_step": best_step if best_state is not None else cfg.steps,
        "steps_run": step,
    }


def select_threshold(
    probs: np.ndarray,
    labels: np.ndarray,
    target_precision: float = 0.95,
    min_threshold: float = MIN_THRESHOLD,
) -> tuple[float, dict[str, Any]]:
    """The lowest threshold >= ``min_threshold`` whose precision on these (validation) frames
    reaches ``target_precision``: maximum recall under the precision target.

    The threshold is placed midway between the lowest accepted probability and the next lower
    score, so it classifies the validation frames the same way with margin on both sides. If no
    threshold reaches the target, the one with the best precision is returned and
    ``info["met_target"]`` is False. Ignored frames (label -1) are dropped.
    """
    if not 0.0 < target_precision <= 1.0:
        raise ValueError(f"target_precision must be in (0, 1], got {target_precision}")
    keep = labels != -1
    p, y = np.asarray(probs)[keep], labels[keep] == POSITIVE
    if not y.any():
        raise ValueError("threshold selection needs positive validation frames, got none")
    candidates = np.unique(p[p >= min_threshold])[::-1]  # high -> low
    best = None  # (precision, threshold index) of the best precision seen
    chosen = None
    for j, t in enumerate(candidates):
        fired = p >= t
        precision = float(y[fired].mean())
        if best is None or precision > best[0]:
            best = (precision, j)
        if precision >= target_precision:
            chosen = j  # keep lowering: recall only grows
    met = chosen is not None
    pick = chosen if met else (best[1] if best is not None else None)
    if pick is None:  # nothing scores above min_threshold: the classifier never fires
        return 1.0, {"met_target": False, "val": frame_metrics(p, y.astype(np.int8), 1.0)}
    below = p[p < candidates[pick]]
    lower = max(float(below.max()) if below.size else min_threshold, min_threshold)
    threshold = float((candidates[pick] + lower) / 2) if lower < candidates[pick] else float(lower)
    return threshold, {"met_target": met, "val": frame_metrics(p, y.astype(np.int8), threshold)}


def frame_metrics(probs: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, Any]:
    """Precision, recall, F1, accuracy and counts of ``probs >= threshold`` vs labels 1/0
    (label -1 frames dropped). Precision is 1 when nothing fires (no false reward given)."""
    keep = labels != -1
    fired, y = np.asarray(probs)[keep] >= threshold, labels[keep] == POSITIVE
    tp, fp = int(np.sum(fired & y)), int(np.sum(fired & ~y))
    fn, tn = int(np.sum(~fired & y)), int(np.sum(~fired & ~y))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": (tp + tn) / max(1, tp + fp + fn + tn),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "positives": int(y.sum()),
        "negatives": int((~y).sum()),
    }


def episode_metrics(probs: np.ndarray, frames: Frames, threshold: float) -> dict[str, Any]:
    """Did it fire in successful episodes, and never in failed ones?

    An episode "fires" if any of its frames scores >= threshold. Episode precision: fired
    episodes that succeeded; recall: successful episodes that fired. ``early`` counts successful
    episodes whose first firing comes before their first positive frame (``lead_frames``: by
    how much, mean over those).
    """
    tp = fp = fn = tn = early = 0
    leads = []
    for ep, success in frames.success.items():
        m = frames.episode == ep
        fired = np.asarray(probs)[m] >= threshold
        if success and fired.any():
            tp += 1
            first_fire = int(np.argmax(fired))
            first_pos = int(np.argmax(frames.labels[m] == POSITIVE))
            if first_fire < first_pos:
                early += 1
                leads.append(first_pos - first_fire)
        elif success:
            fn += 1
        elif fired.any():
            fp += 1
        else:
            tn += 1
    return {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else float("nan"),
        "fired_in_successes": f"{tp}/{tp + fn}",
        "fired_in_failures": f"{fp}/{fp + tn}",
        "early": early,
        "lead_frames": float(np.mean(leads)) if leads else 0.0,
    }


def label_counts(labels: np.ndarray) -> dict[str, int]:
    """``{"positive", "negative", "ignored"}`` frame counts."""
    return {
        "positive": int(np.sum(labels == POSITIVE)),
        "negative": int(np.sum(labels == NEGATIVE)),
        "ignored": int(np.sum(labels == -1)),
    }
