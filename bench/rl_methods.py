"""Head-to-head of the RL methods on bases that are weak for real reasons; JSON lines + table.

Usage:
    python bench/rl_methods.py bases [bases=a,b,c] [out=bench/out/rl_methods]
    python bench/rl_methods.py run methods=residual,dsrl bases=a seeds=0,1,2 [jobs=2] [out=...]
    python bench/rl_methods.py table [out=...] [docs=docs/rl_methods.md]

``bases`` builds every base with the CLI (no planted bias, no corrections): the task's scripted
expert records a few demos (``robotrl collect``), a flow policy is cloned from them
(``robotrl train-bc``) and evaluated on 100 fresh episodes (``robotrl eval``). Base ``c`` is base
``a`` run in PyBullet (the sim-to-"real" case). The demo buffer of every RL run holds exactly the
base's own demos.

``run`` trains every (method, base, seed) with ``robotrl train-rl`` (defaults plus the method's
overrides, sparse task reward), then re-evaluates its final policy on 100 fresh episodes
(``robotrl eval``, Wilson 95 % interval; seeds from 200 000, which no training evaluation saw).
``jobs`` runs in parallel with one torch thread each. Finished cells are skipped on a rerun
(``results.jsonl``), and by a ``run`` beside another on the same ``out`` once that one finished
them (a cell that both have started runs twice).

``table`` aggregates ``results.jsonl`` into a markdown table (mean over seeds; env steps to 80 %
and 90 % in the 20-episode training evaluations, the re-evaluation with its interval, wall time)
and PNG learning curves (mean and min-max over seeds) next to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

# base -> how it is built: task, expert demos, BC steps, backend for RL and evaluation
BASES: dict[str, dict[str, Any]] = {
    "a": {"task": "lift", "demos": 15, "bc_steps": 1000, "backend": "mujoco", "budget": 20_000},
    "b": {"task": "peg_insert", "demos": 120, "bc_steps": 4000, "backend": "mujoco",
          "budget": 60_000},
    "c": {"same_as": "a", "backend": "pybullet", "budget": 20_000},
}  # fmt: skip
# the success classifier a robot would train (``robotrl train-reward``) for the ``*_clf``
# methods: front-camera episodes of a noisy, biased expert (about half of them fail)
CLASSIFIER: dict[str, dict[str, Any]] = {
    "a": {"episodes": 90, "expert_noise": 0.5, "expert_bias": 0.3, "image_size": 64,
          "seed": 1000},
}  # fmt: skip
# method -> train-rl overrides on top of the defaults
METHODS: dict[str, list[str]] = {
    "residual": [],
    "hil": ["human=scripted"],
    # the scripted operator of the rows measured before 2026-12-07: it watches the motion only
    "hil_motion": ["human=scripted", "human_rotation_threshold=null"],
    "hil_clf": ["human=scripted", "reward_classifier={classifier}"],
    # HIL with a residual bound of 0.5: for a base whose error exceeds the default's 0.1 (base c)
    "hil_wide": ["human=scripted", "residual.scale=0.5"],
    "hil_wide_clf": ["human=scripted", "residual.scale=0.5", "reward_classifier={classifier}"],
    "residual_ppo": ["algo=residual_ppo"],
    "dsrl": ["algo=dsrl"],
    "flow_sde": ["algo=flow_sde"],
    "flow_noise": ["algo=flow_noise"],
    "grpo": ["algo=grpo"],
    # SAC-family learner from scratch with the same demos: the residual learner (ensemble,
    # LayerNorm, symmetric demo sampling) on a zero base, with its from-scratch recipe (rlpd.*)
    "rlpd": ["algo=rlpd"],
    # peg_insert only: policy iteration on a success potential of the base's own rollouts
    "potential": ["algo=potential"],
}
LABELS = {
    "residual": "residual (ResFiT)",
    "hil": "residual + scripted human (HIL)",
    "hil_motion": "HIL, the operator watching the motion only",
    "hil_clf": "HIL, reward from a success classifier",
    "hil_wide": "HIL, residual bound 0.5 (`residual.scale=0.5`)",
    "hil_wide_clf": "HIL, bound 0.5, reward from a success classifier",
    "residual_ppo": "residual PPO (ResiP, on-policy)",
    "dsrl": "DSRL (noise space)",
    "flow_sde": "Flow-SDE PPO",
    "flow_noise": "Flow-Noise PPO",
    "grpo": "GRPO",
    "rlpd": "RLPD-style from scratch (TD3 actor, same demos)",
    "potential": "success potential + actor (no critic; peg_insert)",
}
# methods that read peg_insert's state (the peg and the hole)
PEG_ONLY = {"potential"}
# methods with a budget of their own (on-policy: far more env steps than the base's budget)
OWN_BUDGET = {"residual_ppo"}
FRESH_SEED = 200_000  # re-evaluations start here: episodes no training evaluation (100 000+) saw


def _args(argv: Sequence[str]) -> tuple[str, dict[str, str]]:
    if not argv or argv[0] not in ("bases", "run", "table"):
        raise SystemExit(__doc__)
    out = {
        "out": "bench/out/rl_methods",
        "methods": "residual,hil,dsrl",
        "bases": "a",
        "seeds": "0,1,2",
        "jobs": "2",
        "docs": "docs/rl_methods.md",
    }
    for a in argv[1:]:
        k, _, v = a.partition("=")
        if k not in out:
            raise SystemExit(f"unknown argument {k!r}; expected one of {sorted(out)}")
        out[k] = v
    if argv[0] == "bases" and not any(a.startswith("bases=") for a in argv[1:]):
        out["bases"] = ",".join(BASES)
    return argv[0], out


def _robotrl(*args: str, log: Path) -> dict[str, Any]:
    """Run one robotrl command with one torch thread; its last stdout line (JSON)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    quiet = [] if args[0] == "collect" else ["progress=false"]  # collect prints one status line
    cmd = [sys.executable, "-m", "robotrl.cli", *args, *quiet]
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=f, text=True, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(args[:2])} failed (exit {proc.returncode}); see {log}")
    return json.loads(lines[-1])


def _monitor(backend: str) -> list[str]:
    """The overrides that count constraint violations: MuJoCo's safety monitor (PyBullet has
    none)."""
    return ["safety=monitor"] if backend == "mujoco" else []


def _violations(ev: dict[str, Any]) -> int | None:
    """Violation steps of a monitored ``robotrl eval`` (None: not monitored)."""
    counts = ev.get("safety_counts")
    return int(counts["violation_steps"]) if counts else None


def build_bases(
    out: Path, names: Sequence[str] = tuple(BASES), classifiers: bool = True
) -> dict[str, Any]:
    """The bases ``names`` of :data:`BASES` and those they derive from (reused when
    ``bases.json`` has them built from the same task, demo count and BC steps), with their
    success classifiers (:data:`CLASSIFIER`) unless ``classifiers`` is False."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bases.json"
    done = json.loads(path.read_text()) if path.is_file() else {}
    wanted = set(names) | {BASES[n]["same_as"] for n in names if "same_as" in BASES[n]}
    for name, spec in BASES.items():
        recipe = ("task", "demos", "bc_steps")
        ref = BASES[spec["same_as"]] if "same_as" in spec else spec
        same = name in done and all(done[name].get(k) == ref.get(k) for k in recipe)
        if name not in wanted or (same and "violations" in done[name]):
            continue
        if same:  # built before the violations were counted: evaluate it again
            entry = done[name]
        elif "same_as" in spec:
            src = done[spec["same_as"]]
            entry = {**src, "backend": spec["backend"], "budget": spec["budget"]}
        else:
            demos = out / f"demos_{name}_{spec['demos']}.zarr"
            if not demos.exists():
                _robotrl(
                    "collect", f"task={spec['task']}", "device=expert",
                    f"episodes={spec['demos']}", f"out={demos}", log=out / f"collect_{name}.log",
                )  # fmt: skip
            bc = _robotrl(
                "train-bc", str(demos), f"steps={spec['bc_steps']}", "eval_every=0",
                "eval_episodes=0", "threads=1", f"output_dir={out}", f"name=bc-{name}",
                log=out / f"bc_{name}.log",
            )  # fmt: skip
            entry = {**spec, "checkpoint": bc["checkpoint"], "demos_path": str(demos)}
        ev = _robotrl(
            "eval", entry["checkpoint"], "episodes=100", f"seed={FRESH_SEED}", "videos=0",
            "threads=1", f"backend={entry['backend']}", f"output_dir={out}",
            f"name=eval-base-{name}", *_monitor(entry["backend"]),
            log=out / f"eval_base_{name}.log",
        )  # fmt: skip
        entry["success"] = ev["success_rate"]
        entry["success_ci95"] = ev["success_ci95"]
        entry["violations"] = _violations(ev)
        done[name] = entry
        path.write_text(json.dumps(done, indent=1))
        print(json.dumps({"base": name, "success": ev["success_rate"]}), flush=True)
    for name in sorted(wanted & set(CLASSIFIER)) if classifiers else []:
        if "classifier" not in done[name]:
            done[name]["classifier"] = build_classifier(out, name, done[name]["task"])
            path.write_text(json.dumps(done, indent=1))
    return done


def build_classifier(out: Path, name: str, task: str) -> str:
    """Base ``name``'s success classifier (:data:`CLASSIFIER`): its checkpoint directory."""
    spec = CLASSIFIER[name]
    store = out / f"classifier_{name}.zarr"
    if not store.exists():
        size = spec["image_size"]
        _robotrl(
            "collect", f"task={task}", "device=expert", f"episodes={spec['episodes']}",
            f"expert_noise={spec['expert_noise']}", f"expert_bias={spec['expert_bias']}",
            f"seed={spec['seed']}", "cameras=[front]", f"image_size=[{size},{size}]",
            f"out={store}", log=out / f"collect_classifier_{name}.log",
        )  # fmt: skip
    fit = _robotrl(
        "train-reward", f"dataset={store}", "cameras=[front]", f"output_dir={out}",
        f"name=classifier-{name}", log=out / f"classifier_{name}.log",
    )  # fmt: skip
    print(json.dumps({"classifier": name, "test": fit["test"]}), flush=True)
    return str(fit["checkpoint"])


def run_cell(out: Path, bases: dict[str, Any], method: str, base: str, seed: int) -> dict[str, Any]:
    """One training run and its 100-episode re-evaluation."""
    spec = bases[base]
    name = f"{method}-{base}-s{seed}"
    budget = [] if method in OWN_BUDGET else [f"total_steps={spec['budget']}"]
    res = _robotrl(
        "train-rl", f"checkpoint={spec['checkpoint']}", f"demos={spec['demos_path']}",
        f"backend={spec['backend']}", *budget, f"seed={seed}",
        "threads=1", "videos=0", f"output_dir={out / 'runs'}", f"name={name}",
        *_monitor(spec["backend"]), *(o.format(**spec) for o in METHODS[method]),
        log=out / f"{name}.log",
    )  # fmt: skip
    ev = _robotrl(
        "eval", res["checkpoint"], "episodes=100", f"seed={FRESH_SEED}", "videos=0", "threads=1",
        f"backend={spec['backend']}", f"output_dir={out / 'runs'}", f"name=eval-{name}",
        *_monitor(spec["backend"]), log=out / f"eval_{name}.log",
    )  # fmt: skip
    return {
        "method": method,
        "base": base,
        "seed": seed,
        "base_success": bases[base]["success"],
        "final_success": ev["success_rate"],
        "final_ci95": ev["success_ci95"],
        "train_wall_s": res["wall_s"],
        "env_steps": res["env_steps"],
        "metrics": str(Path(res["run_dir"]) / "metrics.csv"),
        # constraint violations (MuJoCo's monitor): the training steps', the final policy's
        "train_safety": res.get("train_safety"),
        "final_violations": _violations(ev),
        "classifier": res.get("classifier"),  # its verdicts on the training episodes vs the sim
    }


def run_all(args: dict[str, str]) -> None:
    out = Path(args["out"])
    methods = args["methods"].split(",")
    need_clf = any("{classifier}" in o for m in methods for o in METHODS.get(m, []))
    bases = build_bases(out, args["bases"].split(","), classifiers=need_clf)
    results = out / "results.jsonl"

    def done() -> set[tuple[str, str, int]]:
        lines = results.read_text().splitlines() if results.is_file() else []
        return {(r["method"], r["base"], r["seed"]) for r in map(json.loads, lines)}

    finished = done()
    cells = [
        (m, b, int(s))
        for b in args["bases"].split(",")
        for m in args["methods"].split(",")
        for s in args["seeds"].split(",")
        if (m, b, int(s)) not in finished
    ]
    for m, b, _ in cells:
        if m not in METHODS or b not in bases:
            raise SystemExit(f"unknown method {m!r} or base {b!r}")
        if any("{classifier}" in o for o in METHODS[m]) and "classifier" not in bases[b]:
            raise SystemExit(f"method {m!r} needs a success classifier; base {b!r} has none")
        if m in PEG_ONLY and bases[b].get("task") != "peg_insert":
            raise SystemExit(f"method {m!r} is peg_insert's; base {b!r} is {bases[b].get('task')}")

    def one(cell: tuple[str, str, int]) -> None:
        if cell in done():  # another `run` on the same out finished it meanwhile
            return
        t0 = time.perf_counter()
        row = run_cell(out, bases, *cell)
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps({**row, "cell_wall_s": round(time.perf_counter() - t0)}), flush=True)

    with ThreadPoolExecutor(int(args["jobs"])) as pool:
        list(pool.map(one, cells))


def _curve(path: str) -> tuple[np.ndarray, np.ndarray]:
    from robotrl.metrics import read_csv

    rows = [r for r in read_csv(path) if "success_rate" in r]
    return np.array([r["env_steps"] for r in rows]), np.array([r["success_rate"] for r in rows])


def _steps_to(curves: list[tuple[np.ndarray, np.ndarray]], level: float) -> str:
    hits = [next((int(x) for x, y in zip(*c, strict=True) if y >= level), None) for c in curves]
    reached = [h for h in hits if h is not None]
    if not reached:
        return "not reached"
    txt = f"{int(np.mean(reached)):,}"
    return txt if len(reached) == len(hits) else f"{txt} ({len(reached)}/{len(hits)} seeds)"


def _violation_cells(cell: list[dict[str, Any]], base: dict[str, Any]) -> str:
    """The two violation columns of a (method, base) row: the training steps' rate and the
    final policies' violation steps over the re-evaluation (mean over seeds), next to the
    base's own; "n/a" where nothing was monitored (PyBullet, or runs from before the count)."""
    rates = [r["train_safety"]["per_1000_steps"] for r in cell if r.get("train_safety")]
    finals = [r["final_violations"] for r in cell if r.get("final_violations") is not None]
    train = f"{np.mean(rates):.1f}" if len(rates) == len(cell) else "n/a"
    if len(finals) != len(cell):
        return f"{train} | n/a"
    return f"{train} | {np.mean(finals):.0f} ({base.get('violations', 'n/a')})"


def table(args: dict[str, str]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args["out"])
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    bases = json.loads((out / "bases.json").read_text())
    docs = Path(args["docs"])
    img_dir = docs.parent / "img"
    img_dir.mkdir(parents=True, exist_ok=True)
    lines = [
        "| base | method | seeds | base success | env steps to 80 % | to 90 % "
        "| final success (100 ep, mean) | per seed [95 % CI] | wall s "
        "| violations per 1 000 training steps | violation steps in 100 episodes (base) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in sorted({r["base"] for r in rows}):
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for m in METHODS:
            cell = sorted(
                (r for r in rows if r["base"] == b and r["method"] == m), key=lambda r: r["seed"]
            )
            if not cell:
                continue
            curves = [_curve(r["metrics"]) for r in cell]
            finals = [r["final_success"] for r in cell]
            per_seed = ", ".join(
                f"{r['final_success']:.2f} [{r['final_ci95'][0]:.2f}, {r['final_ci95'][1]:.2f}]"
                for r in cell
            )
            lines.append(
                f"| {b} | {LABELS[m]} | {len(cell)} | {bases[b]['success']:.2f} "
                f"| {_steps_to(curves, 0.8)} | {_steps_to(curves, 0.9)} | {np.mean(finals):.2f} "
                f"| {per_seed} | {np.mean([r['train_wall_s'] for r in cell]):.0f} "
                f"| {_violation_cells(cell, bases[b])} |"
            )
            n = min(len(c[0]) for c in curves)
            x = curves[0][0][:n]
            ys = np.stack([c[1][:n] for c in curves])
            ax.plot(x, ys.mean(0), label=LABELS[m])
            ax.fill_between(x, ys.min(0), ys.max(0), alpha=0.2)
        ax.axhline(bases[b]["success"], color="gray", ls="--", lw=1, label="base (100 episodes)")
        ax.set(xlabel="env steps", ylabel="success (20 episodes)", ylim=(-0.02, 1.02))
        ax.set_title(f"base {b}: {bases[b].get('task', bases[bases[b].get('same_as', b)]['task'])}"
                     f" ({bases[b]['backend']})")  # fmt: skip
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(img_dir / f"rl_methods_{b}.png", dpi=110)
        plt.close(fig)
    return "\n".join(lines)


if __name__ == "__main__":
    action, args = _args(sys.argv[1:])
    if action == "bases":
        print(json.dumps(build_bases(Path(args["out"]), args["bases"].split(",")), indent=1))
    elif action == "run":
        run_all(args)
    else:
        print(table(args))
