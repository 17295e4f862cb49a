"""Force-limit violations with and without the safety reflex, per scripted policy; JSON.

Usage: python bench/reflex_violations.py [task=peg_insert] [episodes=100] [critic=<npz>]
       [pretrain_episodes=60] [updates=4000] [threshold=0.05,0.02] [recovery=hold|min_risk|yield]
       [task_keys=hole_pos,peg_pos] [policies=careless,random,adversarial,expert]
       [train_force_limit=30] [soft=0.01] [slow_min=0.25] [soften=contact|always]
       [slowing=cap|scale] [brake_time=0.02] [stiffness_scale=0.25] [gamma_safe=0.8]
       [grasp_release_z=0.08|none] [slow_in_contact=true|false]
       [seed=500000] [out=outputs/reflex]

Without ``critic`` a risk critic is pre-trained first (:func:`pretrain_critic`, seeds 0..;
``train_force_limit`` [N]: label its data with a tighter force limit than the 30 N counted)
and exported to ``<out>/critic_<task>.npz``. Then every policy (the expert and the risky
ones of :mod:`sim.risky_policy`) runs ``episodes`` episodes on held-out seeds (from 500 000)
with the same seeds and policy RNG: once ``safety=monitor`` (filter only) and once
``safety=reflex`` per threshold (eps_safe; default the critic's); ``soft`` adds the slowing
zone below it (eps_soft, :mod:`controllers.reflex`), ``soften=always`` lowers the stiffness
whenever the reflex slows or recovers; ``grasp_release_z`` [m] keeps a held object gripped
above that TCP height (:mod:`controllers.grasp_hold`; default the task's, ``none``: off).
Reported per policy and mode: force-limit violations (control steps in which any physics tick
saw |F_ext| > limit) per 100 episodes, episodes with any force violation, all-constraint
violation steps, success rate, peak force, reflex interventions; and the reduction ratio.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

import sim
from robotrl.algos.risk_data import pretrain_critic
from robotrl.algos.safety_critic import SafetyCriticConfig
from sim.risky_policy import RISKY_POLICIES

EVAL_SEED = 500_000  # held out: pre-training uses seeds below 40 000


def run(
    task: str, policy: str, episodes: int, safety_kwargs: dict, mode: str, seed: int = EVAL_SEED
) -> dict:
    env = sim.make(task, safety=mode, safety_kwargs=safety_kwargs)
    rng = np.random.default_rng(1)
    force_steps, force_eps, viol_steps, succ, fmax, reflex_steps = 0, 0, 0, 0, [], 0
    grasp_holds = 0
    start = time.perf_counter()
    steps = 0
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        pol = sim.make_expert(task, env) if policy == "expert" else RISKY_POLICIES[policy](env, rng)
        done, hit, success, peak = False, False, False, 0.0
        while not done:
            obs, _, term, trunc, info = env.step(pol(obs))
            s = info["safety"]
            force_steps += int(s["violation_force"])
            hit |= s["violation_force"]
            viol_steps += s["cost"]
            reflex_steps += int(s["reflex"])
            grasp_holds += int(s.get("grasp_hold", False))
            peak = max(peak, s["force_max"])
            success |= info["success"]
            done = term or trunc
            steps += 1
        force_eps += int(hit)
        succ += int(success)
        fmax.append(peak)
    env.close()
    return {
        "force_violations_per_100_episodes": round(100 * force_steps / episodes, 1),
        "episodes_with_force_violation": force_eps,
        "constraint_violation_steps": viol_steps,
        "success_rate": succ / episodes,
        "peak_force_median_N": round(float(np.median(fmax)), 1),
        "peak_force_max_N": round(float(np.max(fmax)), 1),
        "reflex_steps_per_episode": round(reflex_steps / episodes, 2),
        "grasp_holds_per_episode": round(grasp_holds / episodes, 2),
        "env_steps_per_s": round(steps / (time.perf_counter() - start), 1),
    }


def _counts(text: str) -> int | dict[str, int]:
    """``"60"`` (every policy) or ``"careless:250,expert:80,..."``."""
    if ":" not in text:
        return int(text)
    return {k: int(v) for k, v in (item.split(":") for item in text.split(","))}


def main(argv: list[str]) -> dict:
    args = dict(a.split("=", 1) for a in argv)
    task = args.get("task", "peg_insert")
    episodes = int(args.get("episodes", 100))
    out = Path(args.get("out", "outputs/reflex"))
    task_keys = tuple(k for k in args.get("task_keys", "").split(",") if k)
    result: dict = {"task": task, "episodes": episodes}
    critic = args.get("critic")
    if critic is None:
        t0 = time.perf_counter()
        _, _, st = pretrain_critic(
            task,
            out / f"critic_{task}.npz",
            episodes=_counts(args.get("pretrain_episodes", "60")),
            updates=int(args.get("updates", 4000)),
            task_keys=task_keys,
            cfg=SafetyCriticConfig(gamma_safe=float(args.get("gamma_safe", 0.8))),
            force_limit=float(args["train_force_limit"]) if "train_force_limit" in args else None,
            progress=False,
        )
        st["wall_s"] = round(time.perf_counter() - t0, 1)
        result["pretrain"] = st
        critic = st["critic"]
    kw: dict = {"task_keys": task_keys, "critic": critic}
    monitor_kw = {"task_keys": task_keys}
    for key, cast in (
        ("recovery", str),
        ("soften", str),
        ("slowing", str),
        ("slow_min", float),
        ("brake_time", float),
        ("stiffness_scale", float),
        ("grasp_release_z", lambda v: None if v == "none" else float(v)),
        ("slow_in_contact", lambda v: v.lower() in ("1", "true", "yes")),
    ):
        if key in args:
            kw[key] = cast(args[key])
    if "soft" in args:
        kw["soft_threshold"] = float(args["soft"])
    # one threshold or a comma list: the filter-only run is shared, the reflex runs per value
    thresholds = [float(t) for t in args["threshold"].split(",")] if "threshold" in args else [None]
    policies = args.get("policies", "careless,random,adversarial,expert").split(",")
    seed = int(args.get("seed", EVAL_SEED))
    result.update(seed=seed, critic=critic, thresholds=thresholds, policies={})
    for p in policies:
        off = run(task, p, episodes, monitor_kw, "monitor", seed)
        row: dict = {"off": off}
        for th in thresholds:
            on = run(task, p, episodes, {**kw, "threshold": th} if th else kw, "reflex", seed)
            a = off["force_violations_per_100_episodes"]
            b = on["force_violations_per_100_episodes"]
            on["reduction"] = round(a / b, 1) if b else (None if a == 0 else f">{a:.0f} (0 left)")
            row[f"reflex@{th}" if th else "reflex"] = on
        result["policies"][p] = row
        print(json.dumps({p: row}), file=sys.stderr, flush=True)
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
