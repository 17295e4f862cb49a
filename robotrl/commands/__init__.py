"""The ``robotrl`` subcommands: name -> (config name, runner, one-line help).

Each runner imports its command module when it runs (a lazy import on purpose: ``robotrl
--help`` and the config reference stay free of torch and the simulators).

The dataclasses a command builds (:data:`CONFIG_DATACLASSES`) are the one source of its
defaults; its YAML restates them next to their docs. ``python -m robotrl.commands
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

from robotrl.config_help import CONF_PACKAGE, reference_markdown, restate_defaults

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
# a key of the section that names a field of the class restates the field's default
CONFIG_DATACLASSES: dict[str, tuple[tuple[str, str], ...]] = {
    "train_rl": (
        ("", "robotrl.algos.residual_training:TrainConfig"),
        ("", "robotrl.algos.dsrl_training:DSRLTrainConfig"),
        ("", "robotrl.algos.flow_pg_training:FlowTrainConfig"),
        ("residual", "robotrl.algos.residual:ResidualConfig"),
        ("dsrl", "robotrl.algos.dsrl:DSRLConfig"),
        ("flow_pg", "robotrl.algos.flow_pg:FlowPGConfig"),
    ),
    "train_bc": (("", "robotrl.bc_training:BCConfig"),),
    "distill": (("", "policies.distillation:DistillConfig"),),
    "train_reward": (("", "robotrl.algos.reward_training:RewardTrainConfig"),),
}


def _yaml_keys(config: str) -> set[str]:
    from robotrl.config_help import read_config_doc

    return set(read_config_doc(config).keys)


def dataclass_defaults(config: str) -> dict[str, Any]:
    """Key path of ``robotrl/conf/<config>.yaml`` -> the default of the dataclass field it sets.

    Raises:
        ValueError: two dataclasses of one key give it different defaults.
    """
    keys = _yaml_keys(config)
    out: dict[str, Any] = {}
    where: dict[str, str] = {}
    for section, target in CONFIG_DATACLASSES.get(config, ()):
        module, name = target.split(":")
        cls = getattr(importlib.import_module(module), name)
        for f in dataclasses.fields(cls):
            path = f"{section}.{f.name}" if section else f.name
            if path not in keys:
                continue
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                continue  # required: the YAML's ??? or a value it chooses
            if path in out and out[path] != default:
                raise ValueError(
                    f"{config}.{path}: {where[path]} gives {out[path]!r}, {name} {default!r}"
                )
            out[path], where[path] = default, name
    return out


def restated_config(config: str) -> str:
    """The text of ``robotrl/conf/<config>.yaml`` with its dataclasses' current defaults."""
    text = resources.files(CONF_PACKAGE).joinpath(f"{config}.yaml").read_text()
    return restate_defaults(text, dataclass_defaults(config))


def write_restated_configs() -> list[str]:
    """Rewrite every YAML of :data:`CONFIG_DATACLASSES` whose restated defaults are stale; the
    names of those rewritten."""
    changed = []
    for config in CONFIG_DATACLASSES:
        path = Path(str(resources.files(CONF_PACKAGE).joinpath(f"{config}.yaml")))
        text = restated_config(config)
        if text != path.read_text():
            path.write_text(text)
            changed.append(config)
    return changed
