"""``robotrl train-reward``: episode store -> success classifier, threshold, held-out metrics.

Episodes are split train / val / test by episode (stratified by success). The classifier is
trained on train frames, its best weights and threshold are chosen on val, and precision /
recall are reported on test episodes it never saw, at the frame level and the episode level.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from robotrl.algos.reward_classifier import (
    RewardClassifier,
    load_reward_classifier,
    save_reward_classifier,
)
from robotrl.algos.reward_labels import POSITIVE, Frames, load_frames, split_by_episode
from robotrl.algos.reward_training import (
    RewardTrainConfig,
    average_precision,
    episode_metrics,
    frame_metrics,
    label_counts,
    score,
    select_threshold,
    train_reward_classifier,
)
from robotrl.datasets import EpisodeStore
from robotrl.datasets.episode_store import open_intact
from robotrl.metrics import MetricsLogger
from robotrl.run import make_run_dir, save_config

TRACE_EPISODES = 6  # held-out episodes drawn in the probability-trace panel


def _build(cfg: DictConfig, store: EpisodeStore, image_keys: list[str]) -> RewardClassifier:
    if cfg.init_from:
        model, _ = load_reward_classifier(cfg.init_from)
        if model.keys != [*image_keys, *cfg.state_keys]:
            raise ValueError(f"init_from={cfg.init_from} reads {model.keys}, not {image_keys}")
        return model
    sizes = {tuple(store.array(k).shape[1:3]) for k in image_keys}
    if len(sizes) != 1:
        raise ValueError(f"cameras {list(cfg.cameras)} have different image sizes {sizes}")
    return RewardClassifier(
        image_keys,
        image_size=sizes.pop(),
        state_dims={k: int(np.prod(store.array(k).shape[1:])) for k in cfg.state_keys},
        feature_dim=cfg.feature_dim,
        hidden=cfg.hidden,
        shift=cfg.shift,
    )


def plot_reward(
    path: Path, probs: np.ndarray, frames: Frames, threshold: float, title: str
) -> Path:
    """Precision-recall curve of ``frames`` and p(success) traces of a few of their episodes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keep = frames.labels != -1
    p, y = probs[keep], frames.labels[keep] == POSITIVE
    order = np.argsort(-p, kind="stable")
    tp = np.cumsum(y[order])
    precision, recall = tp / np.arange(1, len(p) + 1), tp / max(1, y.sum())
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    ax0.plot(recall, precision, label=f"AP {average_precision(probs, frames.labels):.3f}")
    m = frame_metrics(probs, frames.labels, threshold)
    ax0.plot([m["recall"]], [m["precision"]], "o", color="C3", label=f"threshold {threshold:.2f}")
    ax0.set(xlabel="recall", ylabel="precision", title=f"{title}: frames", ylim=(0, 1.02))
    ax0.grid(alpha=0.3)
    ax0.legend()
    eps = list(frames.success)
    succ = [e for e in eps if frames.success[e]][: TRACE_EPISODES // 2]
    fail = [e for e in eps if not frames.success[e]][: TRACE_EPISODES - len(succ)]
    for ep in succ + fail:
        sel = frames.episode == ep
        style = "-" if frames.success[ep] else "--"
        ok = "success" if frames.success[ep] else "failure"
        (line,) = ax1.plot(frames.step[sel], probs[sel], style, label=f"ep {ep} ({ok})")
        pos = frames.step[sel][frames.labels[sel] == POSITIVE]
        if pos.size:
            ax1.axvline(pos[0], color=line.get_color(), alpha=0.3, lw=3)
    ax1.axhline(threshold, color="k", lw=0.8, ls=":", label="threshold")
    ax1.set(xlabel="frame", ylabel="p(success)", title=f"{title}: episodes (band: 1st positive)")
    ax1.set_ylim(-0.02, 1.02)
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_train_reward(cfg: DictConfig) -> dict[str, Any]:
    torch.manual_seed(cfg.seed)
    if cfg.torch_threads:
        torch.set_num_threads(int(cfg.torch_threads))
    if not cfg.cameras:
        raise ValueError("train-reward needs cameras=[...] (e.g. [front]) present in the store")
    store, intact = open_intact(
        cfg.dataset, exclude_damaged=bool(cfg.exclude_damaged), who="robotrl train-reward"
    )
    image_keys = [f"images/{c}" for c in cfg.cameras]
    keys = [*image_keys, *cfg.state_keys]
    missing = [k for k in keys if k not in store.keys]
    if missing:
        raise ValueError(f"{cfg.dataset} has no {missing}; it has {store.keys}")
    success = store.meta("success").astype(bool)
    train_eps, val_eps, test_eps = split_by_episode(
        success, cfg.val_ratio, cfg.test_ratio, seed=cfg.seed
    )
    train_eps, val_eps, test_eps = (e[intact[e]] for e in (train_eps, val_eps, test_eps))
    rule = {"positive_window": cfg.positive_window, "ignore_before": cfg.ignore_before}
    train, val, test = (
        load_frames(store, eps.tolist(), keys, **rule) for eps in (train_eps, val_eps, test_eps)
    )
    model = _build(cfg, store, image_keys)
    store.close()

    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    if cfg.state_keys and not cfg.init_from:
        s = np.concatenate([train.obs[k].reshape(len(train), -1) for k in cfg.state_keys], -1)
        model.set_state_stats(s.mean(0), s.std(0))
    logger = MetricsLogger(run_dir / "metrics.csv")
    tcfg = RewardTrainConfig(
        steps=cfg.steps,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        neg_ratio=cfg.neg_ratio,
        eval_every=cfg.eval_every,
        patience=cfg.patience,
        train_encoder=cfg.train_encoder,
        seed=cfg.seed,
    )
    bar = None
    if cfg.progress:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, desc="train-reward", file=sys.stderr)
    fit = train_reward_classifier(
        model, train, val, tcfg, log=logger.log, progress=bar.update if bar else None
    )
    if bar is not None:
        bar.close()

    val_p, test_p = score(model, val), score(model, test)
    threshold, choice = select_threshold(val_p, val.labels, cfg.target_precision, cfg.min_threshold)
    model.threshold = threshold
    test_frames = frame_metrics(test_p, test.labels, threshold)
    test_frames["average_precision"] = average_precision(test_p, test.labels)
    test_episodes = episode_metrics(test_p, test, threshold)
    meta = {
        "dataset": str(cfg.dataset),
        "labels": rule,
        "target_precision": cfg.target_precision,
        "train_episodes": train_eps.tolist(),
        "val_episodes": val_eps.tolist(),
        "test_episodes": test_eps.tolist(),
        "test_frame_metrics": {k: test_frames[k] for k in ("precision", "recall", "f1")},
    }
    ckpt = save_reward_classifier(model, run_dir / "checkpoint", meta=meta)
    plot = plot_reward(run_dir / "reward_classifier.png", test_p, test, threshold, "test")
    curves = logger.plot(
        run_dir / "training.png", "step", [["loss"], ["val_ap"]], ["train BCE", "val AP"]
    )
    return {
        "command": "train-reward",
        "dataset": str(cfg.dataset),
        "cameras": list(cfg.cameras),
        "state_keys": list(cfg.state_keys),
        "episodes": {
            "train": len(train_eps),
            "val": len(val_eps),
            "test": len(test_eps),
            "test_successes": int(success[test_eps].sum()),
        },
        "frames": {
            "train": label_counts(train.labels),
            "val": label_counts(val.labels),
            "test": label_counts(test.labels),
        },
        "threshold": threshold,
        "threshold_met_target": choice["met_target"],
        "val": choice["val"],
        "test": {"frames": test_frames, "episodes": test_episodes},
        "best_val_ap": fit["best_val_ap"],
        "best_step": fit["best_step"],
        "steps_run": fit["steps_run"],
        "train_s": fit["train_s"],
        "checkpoint": str(ckpt),
        "plot": str(plot),
        "curves": str(curves),
        "run_dir": str(run_dir),
    }
