"""train-rl end to end on a tiny reach base (seconds): checkpoint, curves, scripted human."""

import json
from pathlib import Path

import pytest
import torch
from interrupts import interrupt_at_row
from omegaconf import OmegaConf
from safetensors.torch import load_file
from tiny_reach import reach_demos, tiny_checkpoint
from tiny_vla import TABLETOP_VLA_BC

from robotrl.algos.perception_features import PerceptionFeaturizer
from robotrl.algos.residual import load_agent
from robotrl.algos.residual_policy import ZeroPolicy, load_residual_policy
from robotrl.algos.residual_training import FROM_SCRATCH
from robotrl.cli import compose, main
from robotrl.commands.collect import run_collect
from robotrl.commands.train_bc import run_train_bc
from robotrl.commands.train_rl import run_train_rl
from robotrl.metrics import read_csv

TINY = [
    "total_steps=120",
    "warmup_steps=40",
    "critic_warmup_updates=10",
    "eval_every=60",
    "eval_episodes=1",
    "residual.hidden=32",
    "residual.ensemble=2",
    "residual.utd=1",
    "residual.batch_size=32",
    "progress=false",
]

# the tiny settings of each learner, on top of TINY
ALGO_TINY = {
    "residual": [],
    "dsrl": ["algo=dsrl", "dsrl.hidden=32", "dsrl.batch_size=32"],
    "flow_sde": [
        "algo=flow_sde",
        "flow_pg.rollout_env_steps=60",
        "flow_pg.minibatch_size=30",
        "flow_pg.critic_warmup_iters=1",
    ],
}


@pytest.fixture(scope="module")
def base_and_demos(tmp_path_factory):
    root = tmp_path_factory.mktemp("rl")
    store = reach_demos(root, episodes=4)
    return tiny_checkpoint(root, store, "steps=20", "batch_size=32"), store


@pytest.mark.slow
def test_residual_with_demos_and_scripted_human(tmp_path, base_and_demos):
    ckpt, store = base_and_demos
    out = run_train_rl(
        compose(
            "train_rl",
            [
                f"checkpoint={ckpt}",
                f"demos={store}",
                "human=scripted",
                "human_threshold=0.0",
                "human_rotation_threshold=null",
                f"output_dir={tmp_path}",
                *TINY,
            ],
        )
    )
    assert out["env_steps"] == 120 and out["task"] == "reach"
    assert 0.0 <= out["final_success"] <= 1.0
    # the last evaluation (eval_every=60) and the env step it was taken at, after training
    rows = read_csv(f"{out['run_dir']}/metrics.csv")
    assert [r["env_steps"] for r in rows] == [0, 60, 120]
    assert out["final_success"] == rows[-1]["success_rate"] and out["final_eval_step"] == 120
    assert out["final_is_base"] is False and out["base_success"] == rows[0]["success_rate"]
    # the checkpoint holds the agent of the best evaluation (the latest among equals), or the
    # base's zero residual when no evaluation beat the base's
    best = max(r["success_rate"] for r in rows)
    latest_best = max(r["env_steps"] for r in rows if r["success_rate"] == best)
    assert out["kept_step"] == (0 if best == rows[0]["success_rate"] else latest_best)
    assert out["intervention_rate_first_20"] > 0  # threshold 0: the human takes over at once
    agent, meta = load_agent(out["checkpoint"])
    assert meta["base_checkpoint"] == str(ckpt) and agent.cfg.ensemble == 2
    # the residual learnt on the base's mean noise (the default) and is evaluated on it
    assert meta["base_noise_scale"] == 0.0
    assert load_residual_policy(out["checkpoint"])[0].base.noise_scale == 0.0
    with open(out["plot"], "rb") as f:
        assert f.read(4) == b"\x89PNG"
    assert len(out["videos"]) == 1


@pytest.mark.slow
def test_several_envs_step_in_slices_over_processes(tmp_path, base_and_demos, monkeypatch):
    import robotrl.commands.train_rl as command
    import sim.vector_env

    made = []
    real = sim.vector_env.SlicedVectorEnv

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(command, "SlicedVectorEnv", spy)
    ckpt, store = base_and_demos
    cfg = [f"checkpoint={ckpt}", f"demos={store}", f"output_dir={tmp_path}", "num_envs=2"]
    out = run_train_rl(compose("train_rl", [*cfg, *TINY]))
    assert out["env_steps"] == 120
    assert len(made) == 2  # the training envs, then the evaluation envs (eval_envs=2)
    assert [v.num_envs for v in made] == [2, 2]
    assert made[0].workers == min(2, sim.vector_env.usable_cores())
    assert all(v.closed for v in made)
    made.clear()
    one = [*cfg[:-1], "eval_envs=1"]
    assert run_train_rl(compose("train_rl", [*one, *TINY]))["env_steps"] == 120
    assert made == []  # one training env, evaluations on one env in this process
    with pytest.raises(ValueError, match="eval_envs must be >= 1"):
        run_train_rl(compose("train_rl", [*one[:-1], "eval_envs=0", *TINY]))


@pytest.mark.slow
def test_rlpd_learns_from_scratch_on_a_zero_base(tmp_path, base_and_demos):

    ckpt, store = base_and_demos
    overrides = [f"checkpoint={ckpt}", f"demos={store}", f"output_dir={tmp_path}", *TINY]
    out = run_train_rl(compose("train_rl", [*overrides, "algo=rlpd"]))  # the recipe: rlpd.*
    assert out["algo"] == "rlpd" and out["env_steps"] == 120
    agent, meta = load_agent(out["checkpoint"])
    assert meta["from_scratch"] is True
    recipe = {k: v for k, v in FROM_SCRATCH.items() if k != "warmup_noise"}
    assert {k: getattr(agent.cfg, k) for k in recipe} == recipe
    assert agent.cfg.hidden == 32  # the other residual.* settings still apply
    policy, _ = load_residual_policy(out["checkpoint"])  # what robotrl eval rolls out
    assert isinstance(policy.base, ZeroPolicy)  # the actor alone acts


@pytest.mark.slow
def test_residual_on_a_vla_reads_its_perception_and_its_own_demos(tmp_path, capsys):
    """The residual on a tiny VLA (cameras, instruction, auxiliary state head): its features
    hold the VLA's estimate of the scene, its demo buffer the VLA's demos (instructions
    tokenised for the base's replans), and the checkpoint evaluates through robotrl eval."""
    store = tmp_path / "tabletop.zarr"
    collect = ["task=tabletop_seen", "device=expert", "episodes=2", f"out={store}", "viewer=off"]
    run_collect(compose("collect", [*collect, "cameras=[table]", "image_size=[32,32]"]))
    bc_args = [f"dataset={store}", *TABLETOP_VLA_BC, "steps=2", "batch_size=8", "videos=0"]
    bc = run_train_bc(compose("train_bc", [*bc_args, f"output_dir={tmp_path}"]))
    overrides = [
        f"checkpoint={bc['checkpoint']}",
        f"demos={store}",
        "features=perception",
        "task=tabletop:place/green",
        "videos=0",
        f"output_dir={tmp_path}",
        *TINY,
    ]
    out = run_train_rl(compose("train_rl", overrides))
    assert out["env_steps"] == 120 and out["task"] == "tabletop:place/green"
    agent, meta = load_agent(out["checkpoint"])
    assert meta["features"] == "perception"
    assert agent.cfg.hidden == 32
    policy, _ = load_residual_policy(out["checkpoint"])
    assert isinstance(policy.featurizer, PerceptionFeaturizer)
    assert policy.featurizer.dim == policy.featurizer.state.dim + 3 + 3  # + the two estimates
    evaluation = ["eval", f"checkpoint={out['checkpoint']}", "episodes=1", "videos=0"]
    rc = main([*evaluation, "progress=false", f"output_dir={tmp_path}"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["task"] == "tabletop:place/green" and set(res["families"]) == {"place/green"}
    with pytest.raises(ValueError, match="features=perception is for algo=residual, rlpd or dsrl"):
        run_train_rl(compose("train_rl", [*overrides, "algo=flow_sde"]))


def _constant_classifier(path, logit):
    """A reward classifier of one 8x8 front camera whose verdict is ``logit`` everywhere."""
    import torch

    from robotrl.algos.reward_classifier import RewardClassifier, save_reward_classifier

    clf = RewardClassifier(["images/front"], image_size=(8, 8), feature_dim=4, hidden=8)
    with torch.no_grad():
        clf.head[-1].weight.zero_()
        clf.head[-1].bias.fill_(logit)
    return save_reward_classifier(clf, path)


@pytest.mark.slow
def test_the_training_reward_comes_from_a_reward_classifier(tmp_path, base_and_demos):
    # it always fires: every training episode ends at its first step with reward 1 and a
    # success, while the evaluations keep the task's own success and episode ends
    ckpt, store = base_and_demos
    clf = _constant_classifier(tmp_path / "clf", 5.0)
    out = run_train_rl(
        compose(
            "train_rl",
            [f"checkpoint={ckpt}", f"demos={store}", f"reward_classifier={clf}", "videos=0",
             "eval_envs=1", f"output_dir={tmp_path}", *TINY],
        )
    )  # fmt: skip
    episodes = read_csv(f"{out['run_dir']}/episodes.csv")
    assert out["episodes"] == len(episodes) == out["env_steps"] == 120
    assert all(e["length"] == 1 and e["success"] == 1.0 for e in episodes)
    # ... where the sim says none reached the target
    assert not any(e["oracle_success"] for e in episodes)
    assert out["classifier"] == {
        "episodes": 120,
        "fired": 120,
        "sim_success": 0,
        "fired_before_sim_success": 120,
        "sim_success_not_fired": 0,
    }
    rows = read_csv(f"{out['run_dir']}/metrics.csv")
    # the task ends them, not the classifier (one eval env in this process; two: a vector env)
    assert all(r["mean_length"] > 1 for r in rows)
    # one that never fires: no training episode ends early or succeeds
    never = _constant_classifier(tmp_path / "never", -5.0)
    out = run_train_rl(
        compose(
            "train_rl",
            [f"checkpoint={ckpt}", f"reward_classifier={never}", "videos=0",
             f"output_dir={tmp_path}", *TINY],
        )
    )  # fmt: skip
    episodes = read_csv(f"{out['run_dir']}/episodes.csv")
    assert episodes and not any(e["success"] for e in episodes)
    truth = sum(e["oracle_success"] for e in episodes)  # reached, unrewarded
    assert out["classifier"]["fired"] == out["classifier"]["fired_before_sim_success"] == 0
    assert out["classifier"]["sim_success_not_fired"] == out["classifier"]["sim_success"] == truth


def _timeless(rows: list[dict]) -> list[dict]:
    """The rows without their clock readings (wall time, rates per second)."""
    return [{k: v for k, v in r.items() if "wall" not in k and not k.endswith("_s")} for r in rows]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["residual", "dsrl", "flow_sde"])
def test_the_same_command_twice_gives_the_same_run(tmp_path, base_and_demos, algo):
    """Everything is seeded: the same command twice gives the same curve, the same training
    episodes and the same weights; another seed does not."""
    ckpt, store = base_and_demos
    extra = ALGO_TINY[algo]

    def run(seed: int, name: str) -> tuple[list[dict], list[dict], dict]:
        cfg = [f"checkpoint={ckpt}", f"demos={store}", f"output_dir={tmp_path}", f"name={name}"]
        # the last agent: with keep_best two seeds may both keep the untrained one (the base)
        cfg.append("keep_best=false")
        out = run_train_rl(compose("train_rl", [*cfg, *TINY, *extra, f"seed={seed}"]))
        curve = _timeless(read_csv(f"{out['run_dir']}/metrics.csv"))
        episodes_csv = Path(out["run_dir"]) / "episodes.csv"
        episodes = _timeless(read_csv(episodes_csv)) if episodes_csv.exists() else []
        weights = load_file(Path(out["checkpoint"]) / "model.safetensors")
        return curve, episodes, weights

    curve, episodes, weights = run(3, "first")
    again = run(3, "again")
    assert len(curve) == 3 and curve == again[0]
    assert episodes == again[1]
    assert weights.keys() == again[2].keys()
    assert all(torch.equal(weights[k], again[2][k]) for k in weights)
    other = run(4, "other")[2]
    assert not all(torch.equal(weights[k], other[k]) for k in weights)


@pytest.mark.parametrize("algo", ["residual", "dsrl", "flow_sde"])
def test_evaluating_differently_trains_the_same(tmp_path, base_and_demos, algo):
    """The evaluations draw from their own seeded generator: evaluating on more episodes
    leaves the training's episodes and weights as they were."""
    ckpt, store = base_and_demos

    def run(episodes: int) -> tuple[list[dict], dict]:
        cfg = [f"checkpoint={ckpt}", f"demos={store}", f"output_dir={tmp_path}", "videos=0"]
        args = [*cfg, *TINY, *ALGO_TINY[algo], f"eval_episodes={episodes}", "keep_best=false"]
        out = run_train_rl(compose("train_rl", args))
        episodes_csv = Path(out["run_dir"]) / "episodes.csv"
        trained = _timeless(read_csv(episodes_csv)) if episodes_csv.exists() else []
        return trained, load_file(Path(out["checkpoint"]) / "model.safetensors")

    episodes, weights = run(1)
    again, again_weights = run(3)
    assert episodes == again
    assert weights.keys() == again_weights.keys()
    assert all(torch.equal(weights[k], again_weights[k]) for k in weights)


@pytest.mark.parametrize("algo", ["residual", "dsrl", "flow_sde"])
def test_every_learner_counts_the_violations_of_its_training_steps(tmp_path, base_and_demos, algo):
    """safety=monitor only measures: the run is the one without it, and its JSON counts the
    constraint violations of the training steps (the evaluations' episodes apart)."""
    ckpt, store = base_and_demos

    def run(safety: str) -> tuple[list[dict], dict]:
        cfg = [f"checkpoint={ckpt}", f"demos={store}", f"output_dir={tmp_path}", "videos=0"]
        out = run_train_rl(compose("train_rl", [*cfg, *TINY, *ALGO_TINY[algo], f"safety={safety}"]))
        return _timeless(read_csv(f"{out['run_dir']}/metrics.csv")), out

    curve, off = run("off")
    monitored_curve, out = run("monitor")
    assert "train_safety" not in off
    assert monitored_curve == curve
    counts = out["train_safety"]
    assert counts["steps"] == out["env_steps"]
    assert 0 <= counts["violation_steps"] <= counts["steps"]
    fired = [counts[f"violation_{k}"] for k in ("force", "workspace", "joint_limit")]
    assert max(fired) <= counts["violation_steps"] <= sum(fired)


@pytest.mark.parametrize("algo", ["residual", "dsrl", "flow_sde"])
def test_a_ctrl_c_stops_the_run_and_keeps_its_checkpoint(
    tmp_path, base_and_demos, algo, monkeypatch, capsys
):
    """The first Ctrl-C ends the run at its next step: the checkpoint, the curves and the JSON
    are written as after a full run, no video is recorded, and the exit code is 130."""
    ckpt, store = base_and_demos
    interrupt_at_row(monkeypatch, 2)  # right after the evaluation at 60 env steps
    cfg = [f"checkpoint={ckpt}", f"demos={store}", f"output_dir={tmp_path}", "keep_best=false"]
    assert main(["train-rl", *cfg, *TINY, *ALGO_TINY[algo]]) == 130
    captured = capsys.readouterr()
    assert "train-rl: stopping at the next step" in captured.err
    out = json.loads(captured.out.strip().splitlines()[-1])
    assert out["interrupted"] is True and out["exit_code"] == 130 and out["videos"] == []
    rows = read_csv(f"{out['run_dir']}/metrics.csv")
    assert len(rows) == 2 and out["env_steps"] == rows[-1]["env_steps"] < 120
    assert out["final_eval_step"] == out["kept_step"] == out["env_steps"]  # keep_best=false
    assert (Path(out["checkpoint"]) / "model.safetensors").exists()
    # a full run says it was not interrupted and exits 0
    monkeypatch.undo()
    assert main(["train-rl", *cfg, *TINY, *ALGO_TINY[algo], "videos=0"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["interrupted"] is False and out["env_steps"] >= 120


def test_cli_errors(tmp_path, base_and_demos, capsys):
    ckpt, _ = base_and_demos
    assert main(["train-rl", f"checkpoint={ckpt}", "algo=ppo", f"output_dir={tmp_path}"]) == 2
    assert "unknown algo" in capsys.readouterr().err
    rc = main(
        ["train-rl", f"checkpoint={ckpt}", "human=joystick9", f"output_dir={tmp_path}", *TINY]
    )
    assert rc == 2 and "available" in capsys.readouterr().err
    clf = f"reward_classifier={tmp_path}"
    assert main(["train-rl", f"checkpoint={ckpt}", clf, "algo=dsrl", *TINY]) == 2
    assert "reward_classifier= is for algo=residual or rlpd" in capsys.readouterr().err
    assert main(["train-rl", f"checkpoint={ckpt}", clf, "backend=ros2", *TINY]) == 2
    assert "give ros2.reward_classifier=" in capsys.readouterr().err
    rc = main(["train-rl", f"checkpoint={ckpt}", f"output_dir={tmp_path}", "videos=0", *TINY])
    assert rc == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["algo"] == "residual"


PPO_TINY = [
    "algo=residual_ppo",
    "residual_ppo.total_steps=128",
    "residual_ppo.eval_every=64",
    "residual_ppo.num_envs=2",
    "residual_ppo.rollout_steps=16",
    "residual_ppo.hidden=16",
    "residual_ppo.minibatch_size=16",
    "eval_episodes=1",
    "progress=false",
]


@pytest.mark.slow
def test_residual_ppo_trains_a_checkpoint_that_eval_runs_and_repeats_itself(
    tmp_path, base_and_demos, capsys
):
    ckpt, store = base_and_demos

    def run(name: str) -> dict:
        cfg = [f"checkpoint={ckpt}", f"demos={store}", f"output_dir={tmp_path}", f"name={name}"]
        return run_train_rl(compose("train_rl", [*cfg, *PPO_TINY, "keep_best=false"]))

    out = run("first")
    assert out["algo"] == "residual_ppo" and out["env_steps"] == 128
    rows = read_csv(f"{out['run_dir']}/metrics.csv")
    assert [r["env_steps"] for r in rows] == [0, 64, 128]
    assert Path(out["plot"]).exists() and len(out["videos"]) == 1
    policy, meta = load_residual_policy(out["checkpoint"])
    assert meta["task"] == out["task"] and policy.agent.obs_dim > 0
    weights = load_file(Path(out["checkpoint"]) / "model.safetensors")
    again = load_file(Path(run("again")["checkpoint"]) / "model.safetensors")
    assert weights.keys() == again.keys()
    assert all(torch.equal(weights[k], again[k]) for k in weights)
    capsys.readouterr()
    assert main(["eval", out["checkpoint"], "episodes=1", "videos=0", "progress=false"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["episodes"] == 1


@pytest.mark.parametrize("key", ["total_steps=5000", "eval_every=100", "num_envs=4"])
def test_residual_ppo_takes_its_budget_from_its_own_section(tmp_path, key, capsys):
    args = ["train-rl", f"checkpoint={tmp_path / 'none'}", f"output_dir={tmp_path}"]
    assert main([*args, "algo=residual_ppo", key]) == 2
    err = capsys.readouterr().err
    name = key.split("=")[0]
    assert f"give residual_ppo.{name}=" in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_a_budget_that_ends_in_warm_up_is_refused_up_front(tmp_path, capsys):
    # checked before the checkpoint is loaded, a run dir made or an env stepped
    args = ["train-rl", f"checkpoint={tmp_path / 'none'}", f"output_dir={tmp_path}"]
    assert main([*args, "total_steps=1000"]) == 2  # warmup_steps=1000 by default
    err = capsys.readouterr().err
    assert "total_steps=1000 ends before learning starts (warmup_steps=1000)" in err
    assert "e.g. total_steps=2000" in err
    assert main([*args, "total_steps=300", "warmup_steps=500", "eval_every=250"]) == 2
    assert "e.g. total_steps=750" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_roles_and_cluster_addresses_are_checked_first(tmp_path, capsys):
    common = [f"checkpoint={tmp_path}", f"output_dir={tmp_path}"]
    assert main(["train-rl", *common, "role=gpu"]) == 2
    assert "unknown role 'gpu'" in capsys.readouterr().err
    assert main(["train-rl", *common, "role=actor"]) == 2  # which cluster?
    assert "give ray.address=auto" in capsys.readouterr().err


@pytest.mark.slow
def test_split_role_runs_a_learner_and_an_actor_process(tmp_path, base_and_demos):
    pytest.importorskip("ray", reason="role=split needs the 'dist' extra (ray)")
    ckpt, store = base_and_demos
    out = run_train_rl(
        compose(
            "train_rl",
            [
                f"checkpoint={ckpt}",
                f"demos={store}",
                "role=split",
                "dist.publish_every_s=0.2",
                f"output_dir={tmp_path}",
                "videos=0",
                *TINY,
            ],
        )
    )
    actor, learner = out["actor"], out["learner"]
    assert out["exit_code"] == 0 and out["actor_rc"] == 0 and out["learner_rc"] == 0
    assert actor["role"] == "actor" and actor["env_steps"] == 120 and actor["flushed"]
    assert actor["sent"] == actor["acked"] == learner["received"] and actor["dropped"] == 0
    assert learner["updates"] >= 10  # the critic warm-up at least
    agent, meta = load_agent(learner["checkpoint"])
    assert meta["task"] == "reach" and meta["learner"]["updates"] == learner["updates"]
    assert agent.cfg.ensemble == 2


@pytest.mark.slow
def test_safety_reflex_guards_training_and_learns_online(tmp_path, base_and_demos):
    import numpy as np
    from reflex_weights import pushing_down_low_critic

    ckpt, _ = base_and_demos
    critic = tmp_path / "critic.npz"
    np.savez(critic, **pushing_down_low_critic(z_limit=0.16))
    out = run_train_rl(
        compose(
            "train_rl",
            [
                f"checkpoint={ckpt}",
                f"output_dir={tmp_path}",
                "safety=reflex",
                f"safety_critic={critic}",
                "videos=0",
                *TINY,
            ],
        )
    )
    assert out["safety"] == "reflex" and out["env_steps"] == 120
    counts = out["safety_counts"]
    assert counts["steps"] >= 120  # training and evaluation steps, all guarded
    # the online learner saw the run's transitions and updated the critic in the reflexes
    assert out["safety_online"]["transitions"] >= 120 - out["safety_online"]["skipped"] - 5
    assert out["safety_online"]["updates"] > 0
    from controllers.reflex import RiskMLP

    updated = RiskMLP.from_file(out["safety_online"]["critic"])  # the critic to deploy
    assert updated.feature_names == ["ee_pos", "ee_vel", "force", "gripper"]


def test_the_rlpd_section_states_the_from_scratch_recipe():
    cfg = compose("train_rl", ["checkpoint=x"])
    assert OmegaConf.to_object(cfg.rlpd) == FROM_SCRATCH


def test_rlpd_takes_its_recipe_from_its_own_section(tmp_path, capsys):
    args = ["train-rl", "checkpoint=x", "algo=rlpd", f"output_dir={tmp_path}"]
    for given, key in (("residual.actor_lr=1e-3", "rlpd.actor_lr=0.001"),
                       ("warmup_noise=0.5", "rlpd.warmup_noise=0.5")):  # fmt: skip
        assert main([*args, given]) == 2
        err = capsys.readouterr().err
        assert f"give {key} instead" in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # refused before anything is loaded or written


@pytest.mark.parametrize(
    ("section", "cls"),
    [
        ("residual", "robotrl.algos.residual:ResidualConfig"),
        ("dsrl", "robotrl.algos.dsrl:DSRLConfig"),
        ("flow_pg", "robotrl.algos.flow_pg:FlowPGConfig"),
        ("residual_ppo", "robotrl.algos.residual_ppo:ResidualPPOConfig"),
    ],
)
def test_every_key_of_a_config_section_is_a_field_of_its_dataclass(section, cls):
    # (their defaults: tests/test_commands.py)
    import dataclasses
    import importlib

    module, name = cls.split(":")
    fields = {f.name for f in dataclasses.fields(getattr(importlib.import_module(module), name))}
    cfg = compose("train_rl", ["checkpoint=x"])
    for key in cfg[section]:
        assert key in fields, f"{section}.{key} is not a field of {name}"
