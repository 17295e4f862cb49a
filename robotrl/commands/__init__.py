"""The ``robotrl`` subcommands: name -> (config name, runner, one-line help).

Each runner imports its command module when it runs (a lazy import on purpose: ``robotrl
--help`` and the config reference stay free of torch and the simulators).

``python -m robotrl.commands docs/configuration.md`` regenerates the configuration reference.
"""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import DictConfig

from robotrl.config_help import reference_markdown

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
