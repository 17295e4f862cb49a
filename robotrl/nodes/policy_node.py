"""``robotrl-policy-node``: a checkpoint acting on a robot over ROS 2 through the safety layer.

Loads a checkpoint (:func:`policies.checkpoint.load_policy`: safetensors + config, no pickle),
runs it with :class:`robotrl.chunk_runner.SingleEnvPolicy` (observation history, open-loop
chunks of ``execute_horizon`` actions) on a :class:`hardware.ros2.robot_env.RosRobotEnv` stepped
at ``policy_hz`` (set it to the rate the policy was trained at: the action scale is per step).
Every action passes the safety filter last: in this node (``via_bridge: false``, commands to the
robot's ``equilibrium_pose``) or in a ``robotrl-bridge`` process (``via_bridge: true``, actions
on ``/robotrl/action``). Episodes start with ``reset [seed + k]``; success comes from the sim
robot's ``episode`` messages. Image policies read the cameras they were trained with from the
profile's camera topics; a language-conditioned policy (the VLA) reads its instruction from the
``instruction`` parameter or the ``instruction`` topic (the newest wins; the sim robot publishes
its episode's at every reset). Prints one JSON line: success rate with its Wilson 95 % interval,
episode lengths, watchdog holds and inference time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from hardware.ros2.config import PolicyNodeConfig
from hardware.ros2.node_process import run_node_process
from hardware.ros2.robot_env import LANGUAGE_KEY, RosRobotEnv
from hardware.ros2.transport import Transport
from policies.checkpoint import execute_horizon, load_policy
from robotrl.chunk_runner import SingleEnvPolicy
from robotrl.evaluation import wilson_interval
from sim.registry import task_observation_sizes as task_sizes

log = logging.getLogger(__name__)


@dataclass
class PolicyRunStats:
    """Per-episode outcomes of a policy node run."""

    seeds: list[int] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    holds: list[int] = field(default_factory=list)
    inference_ms: list[float] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)  # the last one of each episode
    stopped_by: str = ""

    def summary(self) -> dict[str, Any]:
        n, k = len(self.successes), int(sum(self.successes))
        lo, hi = wilson_interval(k, n) if n else (0.0, 1.0)
        inf = np.asarray(self.inference_ms) if self.inference_ms else np.zeros(1)
        return {
            "episodes": n,
            "successes": k,
            "success_rate": k / n if n else 0.0,
            "success_ci95": [round(lo, 4), round(hi, 4)],
            "mean_length": float(np.mean(self.lengths)) if n else 0.0,
            "held_steps": int(sum(self.holds)),
            "inference_ms_p50": round(float(np.percentile(inf, 50)), 3),
            "inference_ms_p99": round(float(np.percentile(inf, 99)), 3),
            "per_episode_success": [int(s) for s in self.successes],
            **({"instructions": self.instructions} if any(self.instructions) else {}),
            "stopped_by": self.stopped_by,
        }


class PolicyNode:
    """A checkpoint on a robot env over ``transport`` (see the module docstring).

    Args:
        cfg: policy node configuration.
        transport: a :class:`hardware.ros2.transport.Transport`.
    """

    def __init__(self, cfg: PolicyNodeConfig, transport: Transport) -> None:
        if not cfg.checkpoint:
            raise ValueError("checkpoint must name a checkpoint directory")
        torch.set_num_threads(1)
        self.cfg = cfg
        policy, meta = load_policy(cfg.checkpoint)
        policy.to(cfg.device)
        te = execute_horizon(meta, policy.action_horizon)
        self.runner = SingleEnvPolicy(policy, te)
        task = cfg.task or str(meta.get("task") or "")
        views = dict(meta.get("env") or {})  # the cameras and image size it was trained with
        language = LANGUAGE_KEY in self.runner.runner.keys
        self.env = RosRobotEnv(
            transport,
            cfg.topic_profile(),
            control_hz=cfg.policy_hz,
            command="action" if cfg.via_bridge else "equilibrium_pose",
            max_dpos=cfg.max_dpos,
            max_drot=cfg.max_drot,
            workspace_low=cfg.workspace_low,
            workspace_high=cfg.workspace_high,
            stiffness=cfg.stiffness or None,
            grasp_release_z=cfg.grasp_release_z,
            safety_critic=None if cfg.via_bridge else cfg.safety_critic or None,
            safety_threshold=cfg.safety_threshold or None,
            state_timeout_s=cfg.state_timeout_s,
            max_episode_steps=cfg.max_episode_steps,
            task_sizes=task_sizes(task) if task else None,
            cameras=tuple(views.get("cameras") or ()),
            image_size=tuple(views.get("image_size") or (96, 96)),
            lockstep=cfg.lockstep,
            instruction=cfg.instruction if language else None,
        )
        missing = sorted(set(self.runner.runner.keys) - set(self.env.observation_space.spaces))
        if missing:
            raise ValueError(f"the policy reads {missing}, which the robot env does not provide")
        self.stats = PolicyRunStats()
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run_episode(self, seed: int) -> bool:
        """One episode with ``reset(seed)``; returns success. The policy's sampling noise is
        seeded with ``seed`` too, so an episode is reproducible (and comparable in process)."""
        import torch

        torch.manual_seed(seed)
        obs, _ = self.env.reset(seed=seed)
        self.runner.reset()
        done, length, success, holds = False, 0, False, 0
        while not done and not self._stop.is_set():
            t0 = time.perf_counter()
            action = self.runner(obs)
            self.stats.inference_ms.append((time.perf_counter() - t0) * 1e3)
            obs, _r, terminated, truncated, info = self.env.step(action)
            length += 1
            holds += int(info["hold"])
            success = success or bool(info["success"])
            done = terminated or truncated
        self.stats.seeds.append(seed)
        self.stats.instructions.append(str(obs.get(LANGUAGE_KEY, "")))
        self.stats.successes.append(success)
        self.stats.lengths.append(length)
        self.stats.holds.append(holds)
        log.info("episode seed=%d success=%s length=%d held=%d", seed, success, length, holds)
        return success

    def run(self) -> PolicyRunStats:
        """``cfg.episodes`` episodes (0: until stopped) with seeds ``cfg.seed + k``."""
        k = 0
        while not self._stop.is_set() and (self.cfg.episodes == 0 or k < self.cfg.episodes):
            self.run_episode(self.cfg.seed + k)
            k += 1
        self.stats.stopped_by = "stopped" if self._stop.is_set() else "episodes"
        return self.stats

    def close(self) -> None:
        self.env.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``robotrl-policy-node`` (ROS 2 style arguments: ``--ros-args -p k:=v``)."""
    return run_node_process(PolicyNodeConfig, PolicyNode, argv, summary=PolicyRunStats.summary)


if __name__ == "__main__":
    raise SystemExit(main())
