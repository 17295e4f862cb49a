"""``robotrl dataset {info,verify,repair,import}``: what an episode store holds, its health,
and filling it from other formats."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from hardware.ros2.topics import topic_profile
from robotrl.datasets import EpisodeStore, repair, verify
from robotrl.datasets.action_bias import copy_with_action_bias
from robotrl.datasets.integrity import content_damage, structure_damage
from robotrl.datasets.lerobot_format import export_lerobot, import_lerobot
from robotrl.run import config_list


def dataset_info(cfg: DictConfig) -> dict[str, Any]:
    """What a store holds; the quick structural check's findings under ``damage`` (exit 1 if
    any; ``robotrl dataset verify`` checks the content too)."""
    with EpisodeStore.open(cfg.path, mode="r", check=False) as store:
        damage = [str(d) for d in structure_damage(store)]
        if not damage:
            try:
                return _info(cfg, store)
            except Exception:  # unreadable metadata: name the file instead of a traceback
                damage = [str(d) for d in content_damage(store, keys=[])]
                if not damage:
                    raise
        return {
            "command": "dataset info",
            "path": str(cfg.path),
            "episodes": store.num_episodes,
            "steps": store.num_steps,
            "damage": damage,
            "advice": f"robotrl dataset verify {cfg.path} lists every damaged file",
            "exit_code": 1,
        }


def _info(cfg: DictConfig, store: EpisodeStore) -> dict[str, Any]:
    n = store.num_episodes
    lengths = store.episode_lengths
    keys = {
        spec["key"]: {"shape": spec["shape"], "dtype": spec["dtype"]}
        for spec in store.attrs["keys"].values()
    }
    success = store.meta("success") if n else np.zeros(0, bool)
    tasks = sorted(set(store.meta("task").tolist())) if n else []
    return {
        "command": "dataset info",
        "path": str(cfg.path),
        "robot": store.attrs.get("robot"),
        "fps": store.fps,
        "episodes": n,
        "steps": store.num_steps,
        "episode_length": {
            "min": int(lengths.min()) if n else 0,
            "mean": round(float(lengths.mean()), 2) if n else 0.0,
            "max": int(lengths.max()) if n else 0,
        },
        "success_rate": round(float(success.mean()), 4) if n else None,
        "intervention_steps": int(store.meta("intervention_steps").sum()) if n else 0,
        "tasks": tasks,
        "keys": keys,
        "schema_version": store.attrs.get("schema_version"),
    }


def dataset_verify(cfg: DictConfig) -> dict[str, Any]:
    report = verify(cfg.path, check_chunks=bool(cfg.check_chunks), progress=bool(cfg.progress))
    return {"command": "dataset verify", **report, "exit_code": 0 if report["ok"] else 1}


def dataset_repair(cfg: DictConfig) -> dict[str, Any]:
    report = repair(cfg.path)
    return {
        "command": "dataset repair",
        **report,
        "exit_code": 1 if report["cannot_recover"] else 0,
    }


def dataset_import(cfg: DictConfig) -> dict[str, Any]:
    source = cfg["from"]
    inputs = [str(p) for p in cfg.inputs]
    if not inputs:
        raise ValueError("give the inputs to import: inputs=[path,...]")
    if source == "lerobot":
        return _import_lerobot(cfg, inputs)
    if source != "rosbag":
        raise ValueError(f"unknown import source {source!r}; available: ['lerobot', 'rosbag']")
    from robotrl.datasets.rosbag_import import bag_topics, import_bags  # the 'ros2' extra

    topics = bag_topics(topic_profile(str(cfg.profile)))
    try:
        overrides = OmegaConf.to_object(cfg.topics) if cfg.topics else {}
        topics = dataclasses.replace(topics, **overrides)  # type: ignore[arg-type]
    except TypeError as exc:
        raise ValueError(f"bad topics mapping: {exc}") from exc
    success = config_list(cfg.success) if OmegaConf.is_list(cfg.success) else cfg.success
    before = EpisodeStore.open(cfg.path).num_episodes if _is_store(cfg.path) else 0
    store = import_bags(
        inputs,
        cfg.path,
        topics=topics,
        fps=float(cfg.fps),
        robot=str(cfg.robot),
        task=str(cfg.task),
        language=str(cfg.language),
        success=success,
    )
    with store:
        return {
            "command": "dataset import",
            "from": source,
            "path": str(cfg.path),
            "imported_episodes": store.num_episodes - before,
            "episodes": store.num_episodes,
            "steps": store.num_steps,
        }


def _is_store(path: str) -> bool:
    from pathlib import Path

    return (Path(path) / "zarr.json").exists()


def _import_lerobot(cfg: DictConfig, inputs: list[str]) -> dict[str, Any]:

    if len(inputs) != 1:
        raise ValueError("from=lerobot imports one dataset root: inputs=[path]")
    if _is_store(cfg.path):
        raise ValueError(f"{cfg.path} exists: a LeRobot import creates a new store")
    with import_lerobot(inputs[0], cfg.path) as store:
        return {
            "command": "dataset import",
            "from": "lerobot",
            "path": str(cfg.path),
            "imported_episodes": store.num_episodes,
            "episodes": store.num_episodes,
            "steps": store.num_steps,
        }


def dataset_bias(cfg: DictConfig) -> dict[str, Any]:
    """A copy of the store with a constant bias on every action (systematically-off demos)."""

    if not cfg.out:
        raise ValueError("give the output store: out=...")
    if cfg.bias is None:
        raise ValueError("give the action bias: bias=[dx,dy,dz,drx,dry,drz,grip] (action units)")
    bias = [float(v) for v in config_list(cfg.bias)]
    with copy_with_action_bias(cfg.path, cfg.out, bias) as store:
        n, t = store.num_episodes, store.num_steps
    return {
        "command": "dataset bias",
        "path": str(cfg.path),
        "out": str(cfg.out),
        "bias": bias,
        "episodes": n,
        "steps": t,
    }


def dataset_export(cfg: DictConfig) -> dict[str, Any]:
    if cfg.format != "lerobot":
        raise ValueError(f"unknown export format {cfg.format!r}; available: ['lerobot']")
    if not cfg.out:
        raise ValueError("give the output directory: out=...")

    out = export_lerobot(cfg.path, cfg.out, repo_id=str(cfg.repo_id), video=bool(cfg.video))
    with EpisodeStore.open(cfg.path) as store:
        n, t = store.num_episodes, store.num_steps
    return {
        "command": "dataset export",
        "format": "lerobot",
        "path": str(cfg.path),
        "out": str(out),
        "episodes": n,
        "steps": t,
        "video": bool(cfg.video),
    }
