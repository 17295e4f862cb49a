"""``robotrl quickstart``: the whole recipe on one CPU machine, in minutes (``recipe=vla``: the
language-conditioned VLA's journey, docs/vla.md; :func:`run_vla_recipe`).

1. the task's scripted expert is checked (``robotrl experts``);
2. expert demos are collected (``robotrl collect device=expert``) and copied with a constant
   action bias — a miscalibrated teleop device in miniature;
3. a flow policy is trained on the biased copy (``robotrl train-bc``) and evaluated
   (``robotrl eval``): it inherits the bias and mostly fails;
4. residual RL on the frozen policy, with a scripted human taking over when it strays
   (``robotrl train-rl human=scripted``), evaluated as it learns;
5. ``report.md`` (tables, training and learning curves, videos) is written in the run directory.

Each stage is the CLI command of the same name, composed with overrides, so the quickstart is
also the reference for running the stages by hand.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from robotrl.commands.collect import run_collect
from robotrl.commands.eval import run_eval
from robotrl.commands.experts import run_experts
from robotrl.commands.train_bc import run_train_bc
from robotrl.commands.train_rl import run_train_rl
from robotrl.config_help import compose
from robotrl.datasets.action_bias import copy_with_action_bias
from robotrl.evaluation import wilson_interval
from robotrl.run import config_dict, make_run_dir, save_config


def _overrides(values: dict[str, Any]) -> list[str]:
    out = []
    for k, v in values.items():
        if isinstance(v, list | tuple):
            v = "[" + ",".join(str(x) for x in v) + "]"
        elif v is None:
            v = "null"
        out.append(f"{k}={v}")
    return out


# config name -> the command that runs it
STAGES: dict[str, Callable[[DictConfig], dict[str, Any]]] = {
    "experts": run_experts,
    "collect": run_collect,
    "train_bc": run_train_bc,
    "eval": run_eval,
    "train_rl": run_train_rl,
}


def _stage(name: str, config: str, values: dict[str, Any]) -> dict[str, Any]:
    runner = STAGES[config]
    t0 = time.perf_counter()
    result = runner(compose(config, _overrides(values)))
    if result.get("interrupted"):  # a Ctrl-C: the stage saved its run; none after it runs
        print(f"[quickstart] {name}: stopped, its run is in {result['run_dir']}", file=sys.stderr)
        raise KeyboardInterrupt
    result["stage_wall_s"] = round(time.perf_counter() - t0, 1)
    print(f"[quickstart] {name}: done in {result['stage_wall_s']} s", flush=True)
    return result


def run_quickstart(cfg: DictConfig) -> dict[str, Any]:
    """The recipe ``cfg.recipe`` names: ``residual`` (the default) or ``vla``."""
    if cfg.recipe == "vla":
        return run_vla_recipe(cfg)
    if cfg.recipe != "residual":
        raise ValueError(f"recipe must be 'residual' or 'vla', got {cfg.recipe!r}")
    return run_residual_recipe(cfg)


def run_residual_recipe(cfg: DictConfig) -> dict[str, Any]:
    """Expert demos with a bias -> flow BC -> eval -> residual RL with a scripted human."""

    start = time.perf_counter()
    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    common = {"output_dir": str(run_dir), "progress": cfg.progress}
    controller = {"controller": cfg.controller.name}
    obs_keys = list(cfg.obs_keys) if cfg.obs_keys else None

    experts = _stage(
        "expert check",
        "experts",
        {
            **controller,
            **common,
            "tasks": [cfg.task],
            "episodes": cfg.expert_episodes,
            "videos": 0,
            "seed": cfg.seed,
        },
    )
    demos = run_dir / "demos.zarr"
    collect = _stage(
        "collect demos",
        "collect",
        {
            **controller,
            "task": cfg.task,
            "device": "expert",
            "episodes": cfg.demos,
            "out": str(demos),
            "viewer": "off",
            "seed": cfg.seed,
        },
    )
    biased = run_dir / "demos_biased.zarr"
    copy_with_action_bias(demos, biased, list(cfg.bias)).close()

    bc = _stage(
        "behavior cloning",
        "train_bc",
        {
            **controller,
            **common,
            "dataset": str(biased),
            "policy": "flow",
            "obs_keys": obs_keys,
            "steps": cfg.bc_steps,
            "batch_size": cfg.bc_batch_size,
            "eval_episodes": 0,
            "videos": 0,  # the evaluation stage records the BC policy's videos
            "seed": cfg.seed,
        },
    )
    before = _stage(
        "evaluate BC",
        "eval",
        {
            **common,
            "checkpoint": bc["checkpoint"],
            "episodes": cfg.eval_episodes,
            "num_envs": cfg.eval_envs,
            "videos": cfg.videos,
            "video_size": [240, 320],
        },
    )
    rl = _stage(
        "residual RL",
        "train_rl",
        {
            **common,
            "checkpoint": bc["checkpoint"],
            "demos": str(demos),
            "human": cfg.human,
            "total_steps": cfg.rl_steps,
            "warmup_steps": cfg.rl_warmup_steps,
            "eval_every": cfg.rl_eval_every,
            "eval_episodes": cfg.eval_episodes,
            "eval_envs": cfg.eval_envs,
            "target_success": cfg.target_success,
            "videos": cfg.videos,
            "seed": cfg.seed,
            **{f"residual.{k}": v for k, v in config_dict(cfg.residual).items()},
        },
    )
    n = cfg.eval_episodes
    after_ci = [round(x, 4) for x in wilson_interval(round(rl["final_success"] * n), n)]
    summary = {
        "command": "quickstart",
        "task": cfg.task,
        "human": cfg.human,
        "expert_success": experts["tasks"][cfg.task]["success_rate"],
        "demos": collect["recorded"],
        "bias": list(cfg.bias),
        "bc_steps": bc["steps"],
        "success_before": before["success_rate"],
        "success_before_ci95": before["success_ci95"],
        "success_after": rl["final_success"],
        "success_after_ci95": after_ci,
        "rl_env_steps": rl["env_steps"],
        "intervention_rate_first_20": round(rl["intervention_rate_first_20"], 3),
        "intervention_rate_last_20": round(rl["intervention_rate_last_20"], 3),
        "stage_wall_s": {
            "experts": experts["stage_wall_s"],
            "collect": collect["stage_wall_s"],
            "train_bc": bc["stage_wall_s"],
            "eval_bc": before["stage_wall_s"],
            "residual_rl": rl["stage_wall_s"],
        },
        "wall_s": round(time.perf_counter() - start, 1),
        "run_dir": str(run_dir),
    }
    summary["report"] = str(write_report(run_dir, summary, bc, before, rl))
    return summary


def _rel(path: str | Path, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _media(
    run_dir: Path,
    curves: tuple[tuple[str, Any], ...],
    videos: tuple[tuple[str, Any], ...],
) -> list[str]:
    """Report lines: each curve (title, PNG path or None) as an image, then a ``## Videos``
    section listing each (title, MP4 paths) entry, links relative to ``run_dir``."""
    lines: list[str] = []
    for title, path in curves:
        if path:
            lines += [f"![{title}]({_rel(path, run_dir)})", ""]
    lines += ["## Videos", ""]
    for title, paths in videos:
        for p in paths or []:
            lines.append(f"- {title}: [{Path(p).name}]({_rel(p, run_dir)})")
    return lines


def write_report(
    run_dir: Path,
    summary: dict[str, Any],
    bc: dict[str, Any],
    before: dict[str, Any],
    rl: dict[str, Any],
) -> Path:
    """``<run_dir>/report.md``: what was run, the before/after table, curves and videos."""

    def pct(x: float) -> str:
        return f"{100 * x:.0f} %"

    def ci(c: list[float]) -> str:
        return f"[{100 * c[0]:.1f}, {100 * c[1]:.1f}]"

    s = summary
    lines = [
        f"# robotrl quickstart: {s['task']}",
        "",
        f"Expert demos: {s['demos']} episodes (scripted expert success "
        f"{pct(s['expert_success'])}), copied with the action bias {s['bias']} "
        "(a miscalibrated teleop device). A flow policy is trained on the biased copy, then "
        "refined by residual RL"
        + (
            " with a scripted human who takes over when it strays."
            if s["human"] == "scripted"
            else f" (human: {s['human']})."
        ),
        "",
        "| stage | success | 95 % CI | env steps | wall time |",
        "|---|---|---|---|---|",
        f"| BC flow policy ({s['bc_steps']} steps) | {pct(s['success_before'])} | "
        f"{ci(s['success_before_ci95'])} | - | {s['stage_wall_s']['train_bc']} s |",
        f"| + residual RL | {pct(s['success_after'])} | {ci(s['success_after_ci95'])} | "
        f"{s['rl_env_steps']} | {s['stage_wall_s']['residual_rl']} s |",
        "",
        f"Intervention rate: {s['intervention_rate_first_20']:.2f} over the first 20 training "
        f"episodes, {s['intervention_rate_last_20']:.2f} over the last 20. "
        f"Total wall time {s['wall_s']} s.",
        "",
        "## Curves",
        "",
    ]
    lines += _media(
        run_dir,
        (
            ("BC training", bc.get("plot")),
            ("Residual RL evaluations", rl.get("plot")),
            ("Residual RL training episodes", rl.get("episodes_plot")),
        ),
        (("BC policy", before.get("videos")), ("after RL", rl.get("videos"))),
    )
    lines += [
        "",
        "## Reproduce",
        "",
        "```bash",
        f"robotrl quickstart output_dir={run_dir.parent.parent}",
        "```",
        "",
        f"Checkpoints: BC `{_rel(bc['checkpoint'], run_dir)}`, "
        f"residual `{_rel(rl['checkpoint'], run_dir)}`; resolved configs next to each.",
    ]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


# The VLA recipe's BC settings (docs/vla.md): the expert reads a state token the auxiliary head
# estimates from the cameras' keypoints and the instruction (privileged sim state in training
# only), one observation step, proprioception as input.
VLA_OBS_KEYS = ["state/ee_pos", "state/ee_quat", "state/gripper"]
VLA_AUX_KEYS = [
    "state/red_pos", "state/green_pos", "state/blue_pos", "state/pad_pos",
    "state/target_pos", "state/target_yaw",
]  # fmt: skip
VLA_POLICY = {"expert_input": "state", "aux_input": "grounded", "expert": "mlp", "image_shift": 2}
VLA_CAMERAS = ["table", "wrist"]
FRESH_SEED = 200_000  # before / after RL: episodes none of RL's evaluations saw


def _policy_kwargs(values: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in values.items()) + "}"


def run_vla_recipe(cfg: DictConfig) -> dict[str, Any]:
    """tabletop_seen demos (table + wrist cameras) -> VLA BC -> success per instruction family
    on the seen and the held-out verb x colour pairs -> residual RL on the VLA's own perception,
    on its weakest family -> that family before and after RL -> ``report.md``."""
    v = cfg.vla
    start = time.perf_counter()
    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    common = {"output_dir": str(run_dir), "progress": cfg.progress}
    controller = {"controller": cfg.controller.name}
    experts = _stage(
        "expert check",
        "experts",
        {**controller, **common, "tasks": ["tabletop"], "episodes": cfg.expert_episodes,
         "videos": 0, "seed": cfg.seed},
    )  # fmt: skip
    demos = run_dir / "demos.zarr"
    views = {"cameras": VLA_CAMERAS, "image_size": list(v.image_size)}
    collect = _stage(
        "collect demos",
        "collect",
        {**controller, **views, "task": "tabletop_seen", "device": "expert",
         "episodes": v.demos, "out": str(demos), "viewer": "off", "seed": cfg.seed},
    )  # fmt: skip
    bc = _stage(
        "train the VLA",
        "train_bc",
        {**controller, **common, **views, "dataset": str(demos), "policy": "vla",
         "obs_keys": VLA_OBS_KEYS, "aux_keys": VLA_AUX_KEYS, "obs_horizon": 1,
         "policy_kwargs": _policy_kwargs(VLA_POLICY), "steps": v.bc_steps,
         "execute_horizon": v.execute_horizon, "batch_size": v.batch_size, "eval_episodes": 0,
         "videos": 0, "seed": cfg.seed},
    )  # fmt: skip

    def evaluate(
        name: str, checkpoint: str, task: str, videos: int, seed: int | None = None
    ) -> dict[str, Any]:  # seed None: robotrl eval's own first seed (RL's evaluations' too)
        first = {} if seed is None else {"seed": seed}
        return _stage(
            name,
            "eval",
            {**common, "checkpoint": checkpoint, "task": task, "episodes": v.eval_episodes,
             "videos": videos, "video_size": [240, 320], **first},
        )  # fmt: skip

    seen = evaluate("evaluate: seen families", bc["checkpoint"], "tabletop_seen", cfg.videos)
    unseen = evaluate("evaluate: held-out families", bc["checkpoint"], "tabletop_unseen", 0)
    weakest = weakest_family(_split(seen)["families"], _split(unseen)["families"])
    task = f"tabletop:{weakest}"
    # before and after RL on episodes apart from those RL's own evaluations (and its choice of
    # the agent kept) saw
    before = evaluate(f"evaluate {weakest}", bc["checkpoint"], task, 0, seed=FRESH_SEED)
    rl = _stage(
        f"residual RL on {weakest}",
        "train_rl",
        {**common, "algo": "residual", "features": "perception", "checkpoint": bc["checkpoint"],
         "task": task, "residual.dims": list(v.rl_dims), "total_steps": v.rl_steps,
         "warmup_steps": v.rl_warmup_steps, "eval_every": v.rl_eval_every,
         "eval_episodes": v.rl_eval_episodes, "videos": cfg.videos, "seed": cfg.seed,
         "base_noise_scale": v.rl_base_noise_scale, "residual.actor_lr": v.rl_actor_lr},
    )  # fmt: skip
    after = evaluate(f"evaluate {weakest} after RL", rl["checkpoint"], task, 0, seed=FRESH_SEED)
    summary = {
        "command": "quickstart",
        "recipe": "vla",
        "expert_success": experts["tasks"]["tabletop"]["success_rate"],
        "demos": collect["recorded"],
        "bc_steps": bc["steps"],
        "execute_horizon": v.execute_horizon,
        "seen": _split(seen),
        "held_out": _split(unseen),
        "rl_family": weakest,
        "rl_env_steps": rl["env_steps"],
        "rl_kept_step": rl["kept_step"],
        "family_before_rl": _split(before),
        "family_after_rl": _split(after),
        "stage_wall_s": {
            "collect": collect["stage_wall_s"],
            "train_bc": bc["stage_wall_s"],
            "eval": round(
                seen["stage_wall_s"] + unseen["stage_wall_s"] + before["stage_wall_s"]
                + after["stage_wall_s"], 1
            ),
            "rl": rl["stage_wall_s"],
        },
        "wall_s": round(time.perf_counter() - start, 1),
        "run_dir": str(run_dir),
    }  # fmt: skip
    summary["report"] = str(write_vla_report(run_dir, summary, bc, seen, rl))
    return summary


def weakest_family(*evaluations: dict[str, float]) -> str:
    """The family with the lowest success over the given ``{family: success}`` maps (the first
    in name order among equals)."""
    rates = {f: r for ev in evaluations for f, r in ev.items()}
    if not rates:
        raise ValueError("no family was evaluated")
    return min(sorted(rates), key=lambda f: rates[f])


def _split(ev: dict[str, Any]) -> dict[str, Any]:
    """Success, interval and per-family success of one evaluation."""
    return {
        "success": ev["success_rate"],
        "ci95": ev["success_ci95"],
        "families": {f: r["success_rate"] for f, r in ev.get("families", {}).items()},
    }


def write_vla_report(
    run_dir: Path, s: dict[str, Any], bc: dict[str, Any], seen: dict[str, Any], rl: dict[str, Any]
) -> Path:
    """``<run_dir>/report.md`` of the VLA recipe: per-family table, RL on the weakest family,
    curves, videos."""

    def pct(x: float) -> str:
        return f"{100 * x:.0f} %"

    def ci(c: list[float]) -> str:
        return f"[{pct(c[0])}, {pct(c[1])}]"

    families = sorted({*s["seen"]["families"], *s["held_out"]["families"]})
    fam, b, a = s["rl_family"], s["family_before_rl"], s["family_after_rl"]
    lines = [
        "# robotrl quickstart recipe=vla: tabletop",
        "",
        f"{s['demos']} expert demos of the seen verb x colour pairs (scripted expert "
        f"{pct(s['expert_success'])}), a VLA trained for {s['bc_steps']} steps on the table and "
        f"wrist cameras and the instruction (running {s['execute_horizon']} actions of each "
        "chunk open loop).",
        "",
        "| split | family | VLA |",
        "|---|---|---|",
    ]
    for name, key in (("seen", "seen"), ("held out", "held_out")):
        for f in families:
            if f in s[key]["families"]:
                lines.append(f"| {name} | {f} | {pct(s[key]['families'][f])} |")
        lines.append(f"| {name} | all | {pct(s[key]['success'])} {ci(s[key]['ci95'])} |")
    lines += [
        "",
        f"## Residual RL on the weakest family, {fam}",
        "",
        f"{s['rl_env_steps']} env steps of residual RL on the VLA's own perception, from the "
        f"task's sparse reward; the agent kept is the one of its best evaluation (env step "
        f"{s['rl_kept_step']}). Both rows below are over the same fresh episodes:",
        "",
        "| policy | success |",
        "|---|---|",
        f"| VLA | {pct(b['success'])} {ci(b['ci95'])} |",
        f"| VLA + residual | {pct(a['success'])} {ci(a['ci95'])} |",
        "",
        f"Total wall time {s['wall_s']} s.",
        "",
        "## Curves",
        "",
    ]
    lines += _media(
        run_dir,
        (("VLA training", bc.get("plot")), (f"residual RL on {fam}", rl.get("plot"))),
        (("VLA", seen.get("videos")), (f"VLA + residual on {fam}", rl.get("videos"))),
    )
    path = run_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
