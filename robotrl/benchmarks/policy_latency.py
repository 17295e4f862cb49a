"""Per-chunk inference latency of chunked policies on CPU (batch 1), and the latency benchmark
behind ``robotrl bench latency`` / ``bench/policy_latency.py``.

Policies are the train-bc defaults (hidden 256, depth 3, Ta 16, Da 7, To 2) on the state
observation of a sim task, randomly initialised (latency does not depend on the weights):
flow K = 1, 4, 10; diffusion DDIM 10; the one-step distilled student, timed round-robin.
The VLA (:class:`policies.vla.TinyVLA` at the ``tabletop`` recipe's size: two 64 px cameras,
proprioception, a 16-token instruction) is timed on its own thread count (``vla.threads``).
LeRobot's DiffusionPolicy of a comparable size is timed in the same run, in the separate
lerobot venv (lerobot pins another torch), by running ``lerobot_latency.py`` there as a
subprocess.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig
from torch import nn

import sim
from policies.base import Policy
from policies.diffusion import DiffusionPolicy
from policies.distillation import DistilledPolicy
from policies.flow_matching import FlowMatchingPolicy
from policies.vla import TinyVLA

LEROBOT_SCRIPT = Path(__file__).with_name("lerobot_latency.py")


def percentile(xs: list[float], q: float) -> float:
    """Linear-interpolated ``q``-th percentile (0..100)."""
    return float(np.percentile(np.asarray(xs), q))


def time_calls(fn: Callable[[], Any], calls: int, warmup: int = 5) -> dict[str, float]:
    """Wall time of ``fn()`` over ``calls`` calls after ``warmup``: median and p90 [ms]."""
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return {
        "median_ms": round(statistics.median(times), 3),
        "p90_ms": round(percentile(times, 90), 3),
        "calls": calls,
    }


def time_interleaved(
    fns: Mapping[str, Callable[[], Any]], calls: int, warmup: int = 5
) -> dict[str, dict[str, float]]:
    """:func:`time_calls` for several functions, called round-robin so that a change in machine
    load over the run affects each of them alike (no ordering bias)."""
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(calls):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {
        name: {
            "median_ms": round(statistics.median(ts), 3),
            "p90_ms": round(percentile(ts, 90), 3),
            "calls": calls,
        }
        for name, ts in times.items()
    }


def network_calls_per_chunk(policy: Policy, obs: Mapping[str, torch.Tensor]) -> int:
    """Forward passes of ``policy.net`` (the denoiser / student head) in one predict_chunk."""
    net = policy.net
    if not isinstance(net, nn.Module):
        raise TypeError(f"{type(policy).__name__}.net is not a network")
    count = [0]
    handle = net.register_forward_hook(lambda *a: count.__setitem__(0, count[0] + 1))
    try:
        with torch.no_grad():
            policy.predict_chunk(obs)
    finally:
        handle.remove()
    return count[0]


def chunk_latency(
    policy: Policy, obs: Mapping[str, torch.Tensor], calls: int = 100, warmup: int = 5
) -> dict[str, Any]:
    """Median / p90 [ms] of one ``predict_chunk`` on a batch-1 observation, with the number
    of network evaluations it makes and the parameter count."""
    policy.eval()

    def call() -> None:
        with torch.no_grad():
            policy.predict_chunk(obs)

    out = time_calls(call, calls, warmup)
    out["network_evals"] = network_calls_per_chunk(policy, obs)
    out["params"] = sum(p.numel() for p in policy.parameters())
    return out


def state_dims_of(task: str) -> dict[str, int]:
    """``{"state/<k>": D}`` of a sim task's observation (what train-bc learns from)."""

    env = sim.make(task)
    try:
        return {
            k: int(np.prod(s.shape))
            for k, s in env.observation_space.spaces.items()
            if k.startswith("state/")
        }
    finally:
        env.close()


def lerobot_latency(
    python: str, state_dim: int, env_dim: int, cfg: Mapping[str, Any], timeout: float = 900
) -> dict[str, Any]:
    """Run :data:`LEROBOT_SCRIPT` in the lerobot interpreter ``python``; its JSON, or
    ``{"available": False, "reason": ...}``."""
    if not Path(python).is_file():
        return {"available": False, "reason": f"no lerobot interpreter at {python}"}
    args = {"state_dim": state_dim, "env_dim": env_dim, **cfg}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(cfg["threads"])}
    try:
        out = subprocess.run(
            [python, str(LEROBOT_SCRIPT), json.dumps(args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"available": False, "reason": f"timed out after {timeout} s"}
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"available": False, "reason": f"exit {out.returncode}: {tail}"}
    return {"available": True, **json.loads(out.stdout.strip().splitlines()[-1])}


def run_latency_benchmark(cfg: DictConfig) -> dict[str, Any]:

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    dims = state_dims_of(cfg.task)
    common = {
        "state_dims": dims,
        "action_dim": cfg.action_dim,
        "obs_horizon": cfg.obs_horizon,
        "action_horizon": cfg.action_horizon,
        "hidden": cfg.hidden,
        "depth": cfg.depth,
    }
    obs = {k: torch.randn(1, cfg.obs_horizon, d) for k, d in dims.items()}
    policies: dict[str, Policy] = {
        f"flow_k{k}": FlowMatchingPolicy(**common, num_steps=k) for k in cfg.flow_steps
    }
    policies[f"diffusion_ddim{cfg.ddim_steps}"] = DiffusionPolicy(
        **common, num_inference_steps=cfg.ddim_steps
    )
    teacher = FlowMatchingPolicy(**common, num_steps=max(cfg.flow_steps))
    policies["distilled_1step"] = DistilledPolicy.from_teacher(teacher)

    def caller(p: Policy) -> Callable[[], Any]:
        return lambda: p.predict_chunk(obs)

    with torch.no_grad():
        for p in policies.values():
            p.eval()
        results: dict[str, Any] = time_interleaved(
            {name: caller(p) for name, p in policies.items()}, cfg.calls, cfg.warmup
        )
    for name, p in policies.items():
        results[name]["network_evals"] = network_calls_per_chunk(p, obs)
        results[name]["params"] = sum(x.numel() for x in p.parameters())
    robot = sum(d for k, d in dims.items() if not k.startswith("state/cube"))
    for widths in cfg.lerobot.down_dims:
        lerobot_cfg = {
            "obs_horizon": cfg.obs_horizon,
            "action_horizon": cfg.action_horizon,
            "action_dim": cfg.action_dim,
            "down_dims": list(widths),
            "ddim_steps": cfg.ddim_steps,
            "calls": cfg.calls,
            "warmup": cfg.warmup,
            "threads": cfg.threads,
            "seed": cfg.seed,
        }
        name = f"lerobot_diffusion_ddim{cfg.ddim_steps}_{'-'.join(map(str, widths))}"
        results[name] = lerobot_latency(
            cfg.lerobot.python, robot, sum(dims.values()) - robot, lerobot_cfg
        )
    vla = vla_latency(cfg)
    torch.set_num_threads(cfg.threads)
    return {
        "command": "bench latency",
        "task": cfg.task,
        "obs_dim": sum(dims.values()),
        "batch": 1,
        "threads": cfg.threads,
        "torch": torch.__version__,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "policies": results,
        "vla": vla,
    }


def vla_latency(cfg: DictConfig) -> dict[str, Any]:
    """Per-chunk latency of the recipe-sized VLA on ``cfg.vla.threads`` threads (batch 1)."""

    v = cfg.vla
    torch.set_num_threads(v.threads)
    torch.manual_seed(cfg.seed)
    cams = [f"images/{c}" for c in v.cameras]
    state = {"state/ee_pos": 3, "state/ee_quat": 4, "state/gripper": 1}
    policy = TinyVLA(
        state,
        cfg.action_dim,
        cams,
        obs_horizon=v.obs_horizon,
        action_horizon=cfg.action_horizon,
        num_steps=v.num_steps,
        vocab=[f"w{i}" for i in range(20)],
        **(dict(v.policy_kwargs) if v.get("policy_kwargs") else {}),
    )
    h, w = v.image_size
    obs: dict[str, torch.Tensor] = {k: torch.randn(1, v.obs_horizon, d) for k, d in state.items()}
    for cam in cams:
        obs[cam] = torch.randint(0, 256, (1, v.obs_horizon, h, w, 3), dtype=torch.uint8)
    obs["language"] = policy.tokenize(["w1 w2 w3 w4 w5"])
    return {**chunk_latency(policy, obs, cfg.calls, cfg.warmup), "threads": v.threads}
