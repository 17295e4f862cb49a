"""``robotrl train-bc``: config -> dataset, policy, training, checkpoint, curves, JSON."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from policies.checkpoint import save_policy
from policies.registry import make_policy
from policies.tokenizer import LANGUAGE_KEY, WordTokenizer
from robotrl.bc_training import BCConfig, check_steps, plot_training, train_bc
from robotrl.datasets import (
    EpisodeStore,
    SequenceDataset,
    compute_stats,
    make_dataloader,
    split_episodes,
)
from robotrl.datasets.episode_store import open_intact
from robotrl.metrics import MetricsLogger, final_evaluation
from robotrl.policy_env import env_kwargs, record_videos, rollout_policy
from robotrl.run import make_run_dir, save_config
from robotrl.stop_request import stop_notice, stop_request, stop_summary


def _policy_kwargs(cfg: DictConfig, store: EpisodeStore, obs_keys: list[str], stats: dict) -> dict:
    dims = {k: int(np.prod(store.array(k).shape[1:])) for k in obs_keys if k.startswith("state/")}
    extra = OmegaConf.to_container(cfg.policy_kwargs) if cfg.get("policy_kwargs") else {}
    kw: dict[str, Any] = {
        "state_dims": dims,
        "action_dim": int(store.array("action").shape[1]),
        "image_keys": [k for k in obs_keys if k.startswith("images/")],
        "obs_horizon": cfg.obs_horizon,
        "action_horizon": cfg.action_horizon,
        "hidden": cfg.hidden,
        "depth": cfg.depth,
        "stats": stats,
    }
    kw["num_inference_steps" if cfg.policy == "diffusion" else "num_steps"] = cfg.num_steps
    if cfg.policy == "vla":  # the vocabulary is the store's instructions (saved in the config)
        tokenizer = WordTokenizer.from_texts(store.meta("language").tolist())
        kw["vocab"] = tokenizer.vocab
        kw["aux_dims"] = {k: int(np.prod(store.array(k).shape[1:])) for k in cfg.aux_keys}
    elif cfg.aux_keys:
        raise ValueError(f"aux_keys is for policy=vla, not {cfg.policy}")
    kw.update(extra)  # type: ignore[arg-type]
    return kw


def _episode_obs(policy: Any, store: EpisodeStore) -> dict[str, np.ndarray]:
    """Per-episode observation entries: the tokenised instruction for language policies."""
    tokenizer = getattr(policy, "tokenizer", None)
    if tokenizer is None:
        return {}
    languages = store.meta("language").tolist()
    if not any(languages):
        raise ValueError("a language-conditioned policy needs episodes with `language` metadata")
    return {LANGUAGE_KEY: tokenizer.encode_batch(languages)[0]}


def run_train_bc(cfg: DictConfig) -> dict[str, Any]:
    check_steps(cfg.steps)  # before the dataset is read or a run dir is made
    torch.manual_seed(cfg.seed)
    store, intact = open_intact(
        cfg.dataset, exclude_damaged=bool(cfg.exclude_damaged), who="robotrl train-bc"
    )
    if store.num_episodes < 2:
        raise ValueError(f"{cfg.dataset} has {store.num_episodes} episodes; BC needs at least 2")
    state_keys = [k for k in store.keys if k.startswith("state/")]
    aux_keys = list(cfg.aux_keys)
    obs_keys = list(cfg.obs_keys) if cfg.obs_keys else [k for k in state_keys if k not in aux_keys]
    obs_keys += [f"images/{c}" for c in cfg.cameras]
    inputs_too = sorted(set(aux_keys) & set(obs_keys))
    if inputs_too:
        raise ValueError(f"aux_keys {inputs_too} are also in obs_keys: an input is no target")
    missing = [k for k in obs_keys + aux_keys if k not in store.keys]
    if missing:
        raise ValueError(f"{cfg.dataset} has no {missing}; it has {store.keys}")
    excluded = int((~intact).sum())
    tasks = sorted(set(store.meta("task").tolist()))
    task = cfg.task or (tasks[0] if len(tasks) == 1 and tasks[0] else None)
    if task is None:
        raise ValueError(f"the store holds tasks {tasks}: give task=... for evaluation")

    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    train_mask, val_split = split_episodes(store.num_episodes, cfg.val_ratio, seed=cfg.seed)
    train_mask, val_split = train_mask & intact, val_split & intact
    val_mask = val_split if val_split.any() else None
    stats = compute_stats(
        store, [k for k in obs_keys if k.startswith("state/")] + aux_keys + ["action"], train_mask
    )
    policy = make_policy(cfg.policy, **_policy_kwargs(cfg, store, obs_keys, stats))
    episode_obs = _episode_obs(policy, store)
    obs_keys += aux_keys  # loaded with each sample: the auxiliary loss's targets
    train_ds = SequenceDataset(
        store,
        obs_keys,
        cfg.obs_horizon,
        cfg.action_horizon,
        episode_mask=train_mask,
        episode_obs=episode_obs,
    )
    if len(train_ds) < cfg.batch_size:
        raise ValueError(
            f"{cfg.dataset}: {len(train_ds)} training samples, fewer than batch_size="
            f"{cfg.batch_size}; lower batch_size or collect more episodes"
        )
    train_loader = make_dataloader(train_ds, cfg.batch_size, seed=cfg.seed)
    val_loader = None
    if val_mask is not None:
        val_ds = SequenceDataset(
            store,
            obs_keys,
            cfg.obs_horizon,
            cfg.action_horizon,
            episode_mask=val_mask,
            episode_obs=episode_obs,
        )
        val_loader = make_dataloader(val_ds, cfg.batch_size, shuffle=False, drop_last=False)

    env_meta = {
        "controller": cfg.controller.name,
        "cameras": list(cfg.cameras),
        "image_size": list(cfg.image_size),
    }
    kwargs = env_kwargs({"env": env_meta})

    meta = {
        "task": task,
        "env": env_meta,
        "execute_horizon": cfg.execute_horizon,
        "dataset": str(cfg.dataset),
    }
    evaluated = [0]  # evaluations so far (the intermediate ones are checkpoint_<step>)

    def evaluate(p: Any) -> dict[str, float]:
        evaluated[0] += 1
        step = evaluated[0] * cfg.eval_every
        if cfg.keep_checkpoints and cfg.eval_every and step < cfg.steps:
            save_policy(p, run_dir / f"checkpoint_{step}", meta={**meta, "train_steps": step})
        if cfg.eval_episodes <= 0:
            return {}
        res = rollout_policy(
            p,
            task,
            kwargs,
            episodes=cfg.eval_episodes,
            num_envs=cfg.num_envs,
            execute_horizon=cfg.execute_horizon,
            seed=cfg.eval_seed,
            progress=False,
        )
        return {"success_rate": res.success_rate, "mean_length": res.mean_length}

    logger = MetricsLogger(run_dir / "metrics.csv")
    bc = BCConfig(
        steps=cfg.steps,
        lr=cfg.lr,
        ema_decay=cfg.ema_decay,
        eval_every=cfg.eval_every,
        seed=cfg.seed,
    )
    keeps = "the checkpoint keeps the weights of the last step"
    with stop_request(stop_notice("robotrl train-bc", keeps)) as stop:
        trained, summary = train_bc(
            policy,
            train_loader,
            bc,
            val_loader=val_loader,
            evaluate=evaluate if cfg.eval_episodes > 0 or cfg.keep_checkpoints else None,
            logger=logger,
            progress=cfg.progress,
            stop=stop,
        )
    interrupted = bool(summary["interrupted"])
    ckpt = save_policy(
        trained, run_dir / "checkpoint", meta={**meta, "train_steps": summary["steps"]}
    )
    plot = plot_training(logger, run_dir)
    final = summary["evaluations"][-1] if summary["evaluations"] else {}
    videos = record_videos(
        trained,
        task,
        kwargs,
        run_dir,
        count=0 if interrupted else cfg.videos,
        seed=cfg.eval_seed,
        execute_horizon=cfg.execute_horizon,
        prefix="bc",
    )
    store.close()
    return {
        "command": "train-bc",
        "policy": cfg.policy,
        "task": task,
        "episodes": int(train_mask.sum()),
        "steps": summary["steps"],
        "train_wall_s": summary["train_wall_s"],
        "final_loss": round(summary["final_loss"], 5),
        "val_loss": final.get("val_loss"),
        "success_rate": final.get("success_rate"),
        **final_evaluation(summary["evaluations"], "step"),
        "eval_episodes": cfg.eval_episodes,
        "excluded_episodes": excluded,
        "checkpoint": str(ckpt),
        "plot": str(plot),
        "videos": videos,
        **stop_summary(interrupted),
        "run_dir": str(run_dir),
    }
