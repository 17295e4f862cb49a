"""``robotrl dataset {info,verify,repair}``: what an episode store holds, and its health."""

from __future__ import annotations

from typing import Any

import numpy as np
from omegaconf import DictConfig

from robotrl.datasets import EpisodeStore, repair, verify


def dataset_info(cfg: DictConfig) -> dict[str, Any]:
    with EpisodeStore.open(cfg.path, mode="r") as store:
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
    report = verify(cfg.path, check_chunks=bool(cfg.check_chunks))
    return {"command": "dataset verify", **report, "exit_code": 0 if report["ok"] else 1}


def dataset_repair(cfg: DictConfig) -> dict[str, Any]:
    return {"command": "dataset repair", **repair(cfg.path)}
