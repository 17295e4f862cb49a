"""Perception or action? A VLA with a state token (``expert_input=state``) evaluated twice on the
same seeds: as trained (the state token holds the auxiliary head's estimate from the cameras)
and with an oracle (the token holds the true privileged state). The gap is what perception
costs; the oracle's success is what the action expert can do at all. JSON per mode and family;
as trained, also the median distance [mm] between each estimated ``*_pos`` entry and the truth
at the chunk requests.

Usage: python bench/vla_oracle.py <checkpoint> [task=tabletop_seen] [episodes=50] [seed=100000]
       [modes=perceived,oracle] [execute_horizon=<the checkpoint's>]
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from typing import Any

import numpy as np
import torch

import sim
from policies.checkpoint import execute_horizon, load_policy
from robotrl.chunk_runner import as_episode_policy
from robotrl.evaluation import wilson_interval
from robotrl.policy_env import env_kwargs


def run(
    policy: Any, meta: dict, task: str, episodes: int, seed: int, oracle: bool, execute: int
) -> dict:
    """Success per family of ``episodes`` episodes from ``seed``, ``execute`` actions of each
    chunk run open loop; the oracle feeds the true ``aux_dims`` state of the latest observation
    into the state token."""
    if policy.state_token is None:
        raise SystemExit("the checkpoint has no state token (train it with expert_input=state)")
    env = sim.make(task, **env_kwargs(meta))
    truth: dict[str, np.ndarray] = {}

    vars(policy).pop("encode", None)  # the policy's own encode (an oracle run replaces it)
    if oracle:  # the state token holds the true state of the latest observation
        as_trained = policy.encode

        def encode(obs: Any) -> torch.Tensor:
            state = torch.cat(
                [
                    policy.normalizer.normalize(k, torch.as_tensor(truth[k]).float()[None])
                    for k in policy.aux_dims
                ],
                dim=-1,
            )
            return as_trained(obs, state=state)

        policy.encode = encode
    errors: dict[str, list[float]] = defaultdict(list)
    if not oracle:  # as trained; the estimate's distance from the truth is recorded
        trained = policy.encode

        def perceived(obs: Any) -> torch.Tensor:
            # the trunk runs twice per chunk here (perceive, then encode): the public API, at a
            # bench's cost only
            estimate = policy.perceive(obs)
            col = 0
            for k, n in policy.aux_dims.items():
                if k.endswith("_pos"):
                    pos = policy.normalizer.unnormalize(k, estimate[:1, col : col + n])[0]
                    miss = pos.detach().numpy() - truth[k]
                    errors[k].append(1000.0 * float(np.linalg.norm(miss)))
                col += n
            return trained(obs, state=estimate)

        policy.encode = perceived
    act = as_episode_policy(policy, execute)
    by_family: dict[str, list[bool]] = defaultdict(list)
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        act.reset()
        torch.manual_seed(seed + i)
        info: dict = {}
        for _ in range(env.max_episode_steps):
            truth.update({k: obs[k] for k in policy.aux_dims})
            obs, _r, term, trunc, info = env.step(act(obs))
            if term or trunc:
                break
        by_family[env.task.family].append(bool(info.get("success")))
    every = [s for v in by_family.values() for s in v]

    def row(oks: list[bool]) -> dict:
        lo, hi = wilson_interval(sum(oks), len(oks))
        return {"success": round(float(np.mean(oks)), 4), "ci95": [round(lo, 3), round(hi, 3)],
                "episodes": len(oks)}  # fmt: skip

    out = {**row(every), "families": {f: row(v) for f, v in sorted(by_family.items())}}
    if errors:
        out["error_mm"] = {k: round(float(np.median(v)), 1) for k, v in errors.items()}
    return out


def main() -> None:
    args = dict(a.split("=", 1) for a in sys.argv[2:])
    torch.set_num_threads(1)
    policy, meta = load_policy(sys.argv[1])
    task = args.get("task", "tabletop_seen")
    episodes, seed = int(args.get("episodes", 50)), int(args.get("seed", 100_000))
    override = int(args["execute_horizon"]) if "execute_horizon" in args else None
    execute = execute_horizon(meta, policy.action_horizon, override)
    out: dict[str, Any] = {"checkpoint": sys.argv[1], "task": task, "execute_horizon": execute}
    for mode in args.get("modes", "perceived,oracle").split(","):
        t0 = time.perf_counter()
        out[mode] = run(policy, meta, task, episodes, seed, mode == "oracle", execute)
        out[mode]["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
