"""The ``robotrl`` subcommands: name -> (config name, runner, one-line help).

Each runner imports its command module when it runs (a lazy import on purpose: ``robotrl
--help`` and the config reference stay free of torch and the simulators).

The dataclasses a command builds (:data:`CONFIG_DATACLASSES`) are the one source of its
defaults; its YAML restates them next to their docs. ``python -m robotrl.commands --defaults
docs/configuration.md`` rewrites those restated values from the dataclasses, then regenerates
the configuration reference.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from robotrl.config_help import (
    CONF_PACKAGE,
    read_config_doc,
    reference_markdown,
    restate_defaults,
    same_value,
)

Command = Callable[[DictConfig], dict]


def _experts(cfg: DictConfig) -> dict:
    from robotrl.commands.experts import run_experts

    return run_experts(cfg)


def _quickstart(cfg: DictConfig) -> dict:
    from robotrl.commands.quickstart import run_quickstart

    return run_quickstart(cfg)


def _collect(cfg: DictConfig) -> dict:
    from robotrl.commands.collect import run_collect

    return run_collect(cfg)


def _train_bc(cfg: DictConfig) -> dict:
    from robotrl.commands.train_bc import run_train_bc

    return run_train_bc(cfg)


def _train_rl(cfg: DictConfig) -> dict:
    from robotrl.commands.train_rl import run_train_rl

    return run_train_rl(cfg)


def _eval(cfg: DictConfig) -> dict:
    from robotrl.commands.eval import run_eval

    return run_eval(cfg)


def _train_reward(cfg: DictConfig) -> dict:
    from robotrl.commands.train_reward import run_train_reward

    return run_train_reward(cfg)


def _dataset(action: str) -> Command:
    def run(cfg: DictConfig) -> dict:
        from robotrl.commands import dataset

        return getattr(dataset, f"dataset_{action}")(cfg)

    return run


def _distill(cfg: DictConfig) -> dict:
    from robotrl.commands.distill import run_distill

    return run_distill(cfg)


def _bench_latency(cfg: DictConfig) -> dict:
    from robotrl.benchmarks.policy_latency import run_latency_benchmark

    return run_latency_benchmark(cfg)


def _bench_sim(cfg: DictConfig) -> dict:
    from robotrl.benchmarks.sim_throughput import run_sim_benchmark

    return run_sim_benchmark(cfg)


# subcommand -> (config name, runner, help)
COMMANDS: dict[str, tuple[str, Command, str]] = {
    "quickstart": (
        "quickstart",
        _quickstart,
        "end to end: biased demos -> BC -> eval -> residual RL with interventions -> report",
    ),
    "experts": ("experts", _experts, "every task's scripted expert, evaluated, with videos"),
    "collect": ("collect", _collect, "teleop / expert data collection into a zarr episode store"),
    "train-bc": ("train_bc", _train_bc, "behavior cloning of a flow / diffusion policy"),
    "eval": ("eval", _eval, "success rate of a checkpoint in sim, with videos"),
    "train-rl": ("train_rl", _train_rl, "RL on a BC checkpoint (algo=residual, human=...)"),
    "distill": ("distill", _distill, "one-step student of a flow / diffusion checkpoint"),
    "train-reward": ("train_reward", _train_reward, "success reward classifier from episodes"),
}
DATASET_ACTIONS: dict[str, tuple[str, Command, str]] = {
    "info": ("dataset", _dataset("info"), "what a store holds"),
    "verify": ("dataset", _dataset("verify"), "check a store; exit 1 if damaged"),
    "repair": ("dataset", _dataset("repair"), "remove what an interrupted commit left"),
    "import": ("dataset", _dataset("import"), "episodes from ROS 2 bags or a LeRobot dataset"),
    "export": ("dataset", _dataset("export"), "write a LeRobotDataset v3 (format=lerobot)"),
    "bias": (
        "dataset",
        _dataset("bias"),
        "a copy with a constant bias on every action (out=, bias=)",
    ),
}
BENCHMARKS: dict[str, tuple[str, Command, str]] = {
    "sim": ("bench_sim", _bench_sim, "env steps/s (1 and N envs) vs raw mj_step"),
    "latency": ("bench_latency", _bench_latency, "per-chunk CPU latency of policies (+ LeRobot)"),
}


def config_reference() -> str:
    """The configuration reference (Markdown) of every command, dataset action and benchmark."""
    entries = [(name, cfg, summary) for name, (cfg, _, summary) in COMMANDS.items()]
    entries.append(("dataset <action>", "dataset", "inspect, verify, repair, import, export"))
    entries += [(f"bench {name}", cfg, summary) for name, (cfg, _, summary) in BENCHMARKS.items()]
    return reference_markdown(entries)


# config -> (section of the YAML ('' for the top level), the dataclass whose fields it sets):
# a key of the section named as a field of the class restates the field's default
CONFIG_DATACLASSES: dict[str, tuple[tuple[str, str], ...]] = {
    "train_rl": (
        ("", "robotrl.algos.residual_training:TrainConfig"),
        ("", "robotrl.algos.dsrl_training:DSRLTrainConfig"),
        ("", "robotrl.algos.flow_pg_training:FlowTrainConfig"),
        ("residual", "robotrl.algos.residual:ResidualConfig"),
        ("dsrl", "robotrl.algos.dsrl:DSRLConfig"),
        ("potential", "robotrl.algos.success_potential:PotentialConfig"),
        ("residual_ppo", "robotrl.algos.residual_ppo:ResidualPPOConfig"),
        ("flow_pg", "robotrl.algos.flow_pg:FlowPGConfig"),
    ),
    "train_bc": (("", "robotrl.bc_training:BCConfig"),),
    "distill": (("", "policies.distillation:DistillConfig"),),
    "train_reward": (("", "robotrl.algos.reward_training:RewardTrainConfig"),),
}


def section_defaults(config: str, section: str, target: str) -> dict[str, Any]:
    """Key path of ``robotrl/conf/<config>.yaml`` under ``section`` -> the default of the
    field of ``target`` (``module:Class``) of that name, for the keys the YAML has."""
    keys = read_config_doc(config).keys
    module, name = target.split(":")
    out: dict[str, Any] = {}
    for f in dataclasses.fields(getattr(importlib.import_module(module), name)):
        path = f"{section}.{f.name}" if section else f.name
        if path not in keys:
            continue
        if f.default is not dataclasses.MISSING:
            out[path] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[path] = f.default_factory()
    return out


def dataclass_defaults(config: str) -> dict[str, Any]:
    """Key path of ``robotrl/conf/<config>.yaml`` -> the default of the dataclass field it sets.

    Raises:
        ValueError: two dataclasses of one key give it different defaults (or types).
    """
    out: dict[str, Any] = {}
    where: dict[str, str] = {}
    for section, target in CONFIG_DATACLASSES.get(config, ()):
        name = target.split(":")[1]
        for path, default in section_defaults(config, section, target).items():
            if path in out and not same_value(out[path], default):
                raise ValueError(
                    f"{config}.{path}: {where[path]} gives {out[path]!r}, {name} {default!r}"
                )
            out[path], where[path] = default, name
    return out


def _conf_file(config: str) -> Path:
    return Path(str(resources.files(CONF_PACKAGE).joinpath(f"{config}.yaml")))


def restated_config(config: str) -> str:
    """The text of ``robotrl/conf/<config>.yaml`` with its dataclasses' current defaults."""
    return restate_defaults(_conf_file(config).read_text(), dataclass_defaults(config))


def write_restated_configs() -> list[Path]:
    """Rewrite every YAML of :data:`CONFIG_DATACLASSES` whose restated defaults are stale; the
    files rewritten.

    Raises:
        RuntimeError: the configs are not files of a source checkout (an installed package).
    """
    changed = []
    for config in CONFIG_DATACLASSES:
        path = _conf_file(config)
        if not (path.is_file() and (path.parents[2] / "pyproject.toml").is_file()):
            raise RuntimeError(f"{path} is not in a source checkout: restate defaults there")
        text = restated_config(config)
        if text != path.read_text():
            path.write_text(text)
            changed.append(path)
    if changed:
        read_config_doc.cache_clear()  # the reference is generated from the new text
    return changed
