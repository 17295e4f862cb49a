"""``robotrl collect``: turn the composed config into env, device, store and session."""

from __future__ import annotations

import os
import sys
from typing import Any

from omegaconf import DictConfig, OmegaConf

import sim
from hardware.devices import ExpertDevice, make_device
from hardware.devices.keyboard import KeyboardDevice, help_text
from robotrl.collection import ACTION_SPACE, ROBOT_NAME, CollectionSession, open_or_create_store
from robotrl.run import config_dict


def _viewer(env: Any, mode: str) -> Any:
    """A passive MuJoCo viewer window when asked for (or ``auto`` and a display exists)."""
    if mode == "off" or (
        mode == "auto" and (not os.environ.get("DISPLAY") or os.environ.get("CI"))
    ):
        return None
    import mujoco.viewer

    return mujoco.viewer.launch_passive(env.model, env.data)


def run_collect(cfg: DictConfig) -> dict[str, Any]:
    if cfg.viewer not in ("auto", "on", "off"):
        raise ValueError(f"viewer must be auto, on or off, got {cfg.viewer!r}")
    env = sim.make(
        cfg.task,
        controller=cfg.controller.name,
        cameras=tuple(cfg.cameras),
        image_size=tuple(cfg.image_size),
    )
    if cfg.device == "expert":
        bias = (
            OmegaConf.to_object(cfg.expert_bias)
            if OmegaConf.is_list(cfg.expert_bias)
            else cfg.expert_bias
        )
        expert = sim.make_expert(cfg.task, env, noise=cfg.expert_noise, bias=bias, seed=cfg.seed)
        device: Any = ExpertDevice(expert)
    else:
        device = make_device(cfg.device, **config_dict(cfg.device_kwargs))
    if isinstance(device, KeyboardDevice):
        print(help_text(), file=sys.stderr)
    realtime = cfg.realtime if cfg.realtime is not None else cfg.device != "expert"
    store = open_or_create_store(
        cfg.out,
        fps=env.control_hz,
        robot=ROBOT_NAME,
        obs_keys=list(env.observation_space.spaces),
        action_space=ACTION_SPACE,
    )
    viewer = _viewer(env, cfg.viewer)
    try:
        session = CollectionSession(
            env,
            device,
            store,
            operator=str(cfg.operator),
            task=cfg.task,
            language=str(cfg.language),
            realtime=bool(realtime),
            fps=env.control_hz,
            seed=cfg.seed,
            on_step=(lambda e: viewer.sync()) if viewer is not None else None,
        )
        stats = session.run(cfg.episodes)
        total = store.num_episodes
    finally:
        store.close()
        env.close()
        if viewer is not None:
            viewer.close()
    return {
        "command": "collect",
        "out": str(cfg.out),
        "recorded": stats.recorded,
        "successes": stats.successes,
        "discarded": stats.discarded,
        "steps": stats.steps,
        "steps_per_s": round(stats.fps, 1),
        "wall_s": round(stats.wall_s, 2),
        "stopped_by": stats.stopped_by,
        "episodes_in_store": total,
    }
