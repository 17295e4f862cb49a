"""``robotrl train-rl``: config -> base, envs, demos, human, learner; curves, videos, JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, cast

import numpy as np
from omegaconf import DictConfig, OmegaConf

import sim
from hardware.devices import make_device
from policies.base import Policy
from robotrl.algos.hil import DeviceIntervener, ScriptedHuman
from robotrl.algos.online_risk import OnlineRiskLearner
from robotrl.algos.perception_features import featurizer_for
from robotrl.algos.residual import (
    ResidualConfig,
    StateFeaturizer,
    feature_stats,
    save_agent,
    stats_meta,
)
from robotrl.algos.residual_policy import ResidualPolicy, ZeroPolicy
from robotrl.algos.residual_training import (
    TrainConfig,
    check_budget,
    demo_buffer,
    train_residual,
)
from robotrl.algos.reward_wrapper import with_reward_classifier
from robotrl.algos.safety_critic import SafetyCritic
from robotrl.commands.dsrl import run_dsrl
from robotrl.commands.flow_pg import FLOW_ALGOS, run_flow_pg
from robotrl.commands.potential import run_potential
from robotrl.commands.residual_ppo import run_residual_ppo
from robotrl.commands.train_rl_roles import act, learn, plot_learning_curves, split
from robotrl.datasets.episode_store import open_intact
from robotrl.distributed.ray_rollout import RayVectorEnv
from robotrl.metrics import MetricsLogger, episodes_summary, learner_summary
from robotrl.policy_env import check_one_robot, frozen_base, record_videos, run_env_kwargs
from robotrl.run import make_run_dir, save_config
from robotrl.stop_request import KEEPS_BEST, stop_notice, stop_request, stop_summary
from sim.vector_env import SlicedVectorEnv


def _human(cfg: DictConfig, task: str, make_env: Any) -> Any:
    if cfg.human == "none":
        return None
    if cfg.human == "scripted":
        env = make_env()
        env.close()  # only its action scales are read (on backend=ros2 it is a robot connection)
        return ScriptedHuman(
            lambda: sim.make_expert(task, env), cfg.num_envs, threshold=cfg.human_threshold,
            rotation_threshold=cfg.get("human_rotation_threshold"),
        )  # fmt: skip
    if cfg.num_envs != 1:
        raise ValueError("a human operator drives one env: set num_envs=1")

    device = make_device(cfg.human)
    device.start()
    return DeviceIntervener(device)


def _vector_envs(cfg: DictConfig, make_env: Any) -> Any:
    """The training envs: on ``ray.workers`` Ray workers; else, for several envs, in slices
    over this process and worker processes (``sim.make_vec``'s vector env); None: one env, or
    envs under the reflex, whose online critic learns in this process, stepped here."""
    workers = int(cfg.get("ray", {}).get("workers", 0) or 0)
    if workers <= 0:
        if cfg.num_envs > 1 and str(cfg.get("safety", "off")) != "reflex":
            return SlicedVectorEnv([make_env] * cfg.num_envs)
        return None
    if cfg.num_envs % workers:
        raise ValueError(f"num_envs ({cfg.num_envs}) must be a multiple of ray.workers ({workers})")

    return RayVectorEnv(
        make_env, workers, cfg.num_envs // workers, address=cfg.ray.get("address") or None
    )


def _eval_envs(cfg: DictConfig, make_env: Any, backend: str) -> Any:
    """The vector env the evaluations run on: ``eval_envs`` sim envs in slices over this
    process and worker processes; None (one env in this process) for one env, a robot, or
    envs under the reflex (``safety=monitor`` only measures: its runs are those without it)."""
    n = int(cfg.get("eval_envs", 1))
    if n == 1 or backend == "ros2" or str(cfg.get("safety", "off")) == "reflex":
        return None
    return SlicedVectorEnv([make_env] * n)


def _classifier_envs(
    cfg: DictConfig, backend: str, kw: dict[str, Any], make_sim_env: Any
) -> Any | None:
    """``reward_classifier=``: a factory of training envs whose reward, episode ends and
    ``info["success"]`` come from the classifier, as on a robot (the evaluations keep the task's
    success); None without one."""
    directory = cfg.get("reward_classifier")
    if not directory:
        return None
    if backend == "ros2":
        raise ValueError(
            "backend=ros2: give ros2.reward_classifier=... (a robot has no task success: the "
            "classifier then decides every episode, the evaluations' too)"
        )
    cameras = tuple(kw.get("cameras", ()))
    size = tuple(kw.get("image_size", (96, 96)))

    def make_train_env() -> Any:
        return with_reward_classifier(
            lambda cams, hw: make_sim_env(cameras=cams, image_size=hw), directory, cameras, size
        )

    return make_train_env


def _classifier_verdicts(episodes: list[dict[str, float]]) -> dict[str, int]:
    """The classifier's verdicts on the training episodes next to the sim's truth. A classifier
    is trained to fire up to ``positive_window - 1`` frames before the sim's success, and the
    episode ends when it fires: ``fired_before_sim_success`` counts those early verdicts as
    well as wrong ones."""
    said = [bool(e["success"]) for e in episodes]
    true = [bool(e.get("oracle_success", False)) for e in episodes]
    return {
        "episodes": len(episodes),
        "fired": sum(said),
        "sim_success": sum(true),
        "fired_before_sim_success": sum(s and not t for s, t in zip(said, true, strict=True)),
        "sim_success_not_fired": sum(t and not s for s, t in zip(said, true, strict=True)),
    }


def _online_risk(cfg: DictConfig) -> Any:
    """The online learner of the reflex's risk critic (continues from the exported weights)."""

    return OnlineRiskLearner(SafetyCritic.from_export(cfg.safety_critic), seed=cfg.seed)


def _safety_summary(safety: str, guards: list[Any], online: Any, run_dir: Any) -> dict[str, Any]:
    """Summed counters of the guarded envs in this process (with the reflex: every training and
    evaluation env; ``train_safety`` counts the training steps alone, wherever their envs run);
    the online-updated critic is exported to ``<run_dir>/safety_critic.npz`` (deploy that one)."""
    if safety == "off":
        return {}
    counts: dict[str, int] = {}
    for g in guards:
        for k, v in g.counts.items():
            counts[k] = counts.get(k, 0) + v
    out: dict[str, Any] = {"safety": safety, "safety_counts": counts}
    if online is not None:
        out["safety_online"] = {
            "transitions": online.received,
            "skipped": online.skipped,
            "updates": online.critic.updates,
            "critic": str(online.critic.export(run_dir / "safety_critic.npz")),
        }
    return out


ROLES = ("single", "learner", "actor", "split")


def _learner_config(cfg: DictConfig) -> tuple[ResidualConfig, float]:
    """The learner's config and warm-up noise: ``residual.*`` and ``warmup_noise``, with
    ``algo=rlpd`` replaced by its ``rlpd.*`` recipe. A recipe key also changed under its residual
    name is a ValueError that names the ``rlpd.`` key to set instead."""
    residual = cast(dict[str, Any], OmegaConf.to_container(cfg.residual, resolve=True))
    warmup_noise = float(cfg.warmup_noise)
    if cfg.algo != "rlpd":
        return ResidualConfig(**residual), warmup_noise
    recipe = cast(dict[str, Any], OmegaConf.to_container(cfg.rlpd, resolve=True))
    defaults = {**asdict(ResidualConfig()), "warmup_noise": TrainConfig.warmup_noise}
    given = {**residual, "warmup_noise": warmup_noise}
    for key in recipe:
        if given[key] != defaults[key]:
            where = key if key == "warmup_noise" else f"residual.{key}"
            raise ValueError(
                f"algo=rlpd takes {where} from its recipe: give rlpd.{key}={given[key]} instead"
            )
    warmup_noise = float(recipe.pop("warmup_noise", warmup_noise))
    return ResidualConfig(**{**residual, **recipe}), warmup_noise


def run_train_rl(cfg: DictConfig) -> dict[str, Any]:

    if cfg.features == "perception" and cfg.algo not in ("residual", "rlpd", "dsrl"):
        raise ValueError(
            f"features=perception is for algo=residual, rlpd or dsrl (algo={cfg.algo} reads the "
            "base's own inputs)"
        )
    if cfg.get("reward_classifier") and cfg.algo not in ("residual", "rlpd"):
        raise ValueError(f"reward_classifier= is for algo=residual or rlpd, not {cfg.algo}")
    if cfg.algo in FLOW_ALGOS:
        return run_flow_pg(cfg)
    if cfg.algo == "dsrl":
        return run_dsrl(cfg)
    if cfg.algo == "residual_ppo":
        return run_residual_ppo(cfg)
    if cfg.algo == "potential":
        return run_potential(cfg)
    if cfg.algo not in ("residual", "rlpd"):
        algos = ["residual", "rlpd", "residual_ppo", "dsrl", "potential", *FLOW_ALGOS]
        raise ValueError(f"unknown algo {cfg.algo!r}; available: {algos}")
    if cfg.role not in ROLES:
        raise ValueError(f"unknown role {cfg.role!r}; available: {list(ROLES)}")
    if cfg.role != "single":
        import importlib.util

        if importlib.util.find_spec("ray") is None:  # not imported: see distributed.cluster
            raise ValueError(
                f"role={cfg.role} needs the 'dist' extra (ray): pip install robotrl[dist]"
            )
        if cfg.role == "actor" and not cfg.ray.get("address"):
            raise ValueError(
                "role=actor joins the learner's Ray cluster: give ray.address=auto (a node "
                "started with `ray start --address=...`) or the address the learner printed"
            )
    if cfg.role in ("single", "split"):  # one actor's budget feeds the learner's warm-up
        check_budget(cfg.total_steps, cfg.warmup_steps, cfg.eval_every)
    rcfg, warmup_noise = _learner_config(cfg)
    if cfg.role == "split":
        return split(cfg)
    # algo=rlpd learns from scratch: the checkpoint lends only its observation keys
    frozen = frozen_base(cfg, ZeroPolicy if cfg.algo == "rlpd" else None)
    base: Policy | ZeroPolicy = frozen.policy
    meta, task, te = frozen.meta, frozen.task, frozen.execute_horizon
    backend = cfg.get("backend", "mujoco")
    check_one_robot(backend, cfg.num_envs, int(cfg.get("ray", {}).get("workers", 0) or 0))
    if int(cfg.get("eval_envs", 1)) < 1:
        raise ValueError(f"eval_envs must be >= 1, got {cfg.eval_envs}")
    kw = run_env_kwargs(cfg, meta)
    safety = str(cfg.get("safety", "off"))
    guards: list[Any] = []  # every guarded env's counters end up in the JSON
    online = _online_risk(cfg) if safety == "reflex" and cfg.get("safety_online", True) else None

    def make_sim_env(**override: Any) -> Any:
        env = sim.make(task, **{**kw, **override})
        if getattr(env, "guard", None) is not None:
            guards.append(env.guard)
            if online is not None:
                online.attach(env.guard)
        return env

    def make_env() -> Any:  # evaluation (and scale-reading) envs: the task's own success
        return make_sim_env()

    make_train_env = _classifier_envs(cfg, backend, kw, make_sim_env) or make_env

    keys = list(cfg.obs_keys) if cfg.obs_keys else list(base.config["state_dims"])
    demos_store, intact = (
        open_intact(cfg.demos, exclude_damaged=bool(cfg.exclude_damaged), who="robotrl train-rl")
        if cfg.demos
        else (None, None)
    )
    stats = feature_stats(keys, base, demos_store, intact)
    featurizer = featurizer_for(str(cfg.features), StateFeaturizer(keys, stats), base)
    name = cfg.name if cfg.role == "single" else f"{cfg.name}-{cfg.role}"
    run_dir = make_run_dir(cfg.output_dir, name)
    save_config(cfg, run_dir)
    demos = (  # the actor only acts: no demo buffer
        demo_buffer(
            demos_store, base, featurizer, rcfg, episodes=np.flatnonzero(intact), seed=cfg.seed
        )
        if demos_store is not None and intact is not None and cfg.role != "actor"
        else None
    )
    train = TrainConfig(
        total_steps=cfg.total_steps,
        warmup_steps=cfg.warmup_steps,
        warmup_noise=warmup_noise,
        critic_warmup_updates=cfg.critic_warmup_updates,
        eval_every=cfg.eval_every,
        eval_episodes=cfg.eval_episodes,
        seed=cfg.seed,
        target_success=cfg.target_success,
        keep_best=bool(cfg.keep_best),
        realtime_hz=0.0 if cfg.human in ("none", "scripted") else 20.0,
    )
    meta_ckpt = {
        "base_checkpoint": str(cfg.checkpoint),
        "from_scratch": cfg.algo == "rlpd",
        "base_noise_scale": frozen.noise_scale,
        "task": task,
        "obs_keys": keys,
        "features": str(cfg.features),
        "execute_horizon": te,
        "featurizer": stats_meta(stats),
    }
    if cfg.role == "learner":
        return learn(cfg, base, featurizer, rcfg, train, demos, meta_ckpt, run_dir)
    logger = MetricsLogger(run_dir / "metrics.csv")
    human = _human(cfg, task, make_env)
    if cfg.role == "actor":
        try:
            return act(
                cfg, base, make_train_env, featurizer, rcfg, train, human, te, logger, run_dir,
                make_eval_env=make_env,
            )  # fmt: skip
        finally:
            if isinstance(human, DeviceIntervener):
                human.device.stop()
    vector_env = _vector_envs(cfg, make_train_env)
    eval_venv = None
    notice = stop_notice("robotrl train-rl", KEEPS_BEST)
    try:
        eval_venv = _eval_envs(cfg, make_env, backend)
        with stop_request(notice) as stop:
            result = train_residual(
                base,
                make_train_env,
                featurizer,
                rcfg,
                train,
                demos=demos,
                num_envs=cfg.num_envs,
                execute_horizon=te,
                intervener=human,
                logger=logger,
                progress=cfg.progress,
                vector_env=vector_env,
                eval_venv=eval_venv,
                make_eval_env=make_env,
                stop=stop,
            )
    finally:
        if eval_venv is not None:
            eval_venv.close()
        if isinstance(human, DeviceIntervener):
            human.device.stop()
    ckpt = save_agent(result.agent, run_dir / "checkpoint", meta_ckpt)
    plot = plot_learning_curves(logger, run_dir)
    videos = (
        record_videos(
            ResidualPolicy(result.agent, base, featurizer, te),
            task,
            kw,
            run_dir,
            count=0 if result.interrupted else int(cfg.videos),
            seed=100_000,
            execute_horizon=te,
            prefix="residual",
        )
        if backend != "ros2"  # a robot is not rendered
        else []
    )
    return {
        "command": "train-rl",
        "algo": cfg.algo,
        "task": task,
        **learner_summary(result),
        **episodes_summary(result.episodes, run_dir),
        "intervention_rate_first_20": float(
            np.mean([e["intervention_rate"] for e in result.episodes[:20]])
        )
        if result.episodes
        else 0.0,
        "intervention_rate_last_20": float(
            np.mean([e["intervention_rate"] for e in result.episodes[-20:]])
        )
        if result.episodes
        else 0.0,
        "classifier": _classifier_verdicts(result.episodes)
        if cfg.get("reward_classifier")
        else None,
        "checkpoint": str(ckpt),
        "plot": plot,
        "videos": videos,
        **_safety_summary(safety, guards, online, run_dir),
        **result.safety.summary(safety),
        **stop_summary(result.interrupted),
        "run_dir": str(run_dir),
    }
