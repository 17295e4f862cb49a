"""train-rl algo=flow_noise|flow_sde|grpo end to end on a tiny reach base in 2 env processes:
checkpoint (reloadable, with the RL K), metrics CSV, curves, videos, JSON fields."""

import pytest
from tiny_reach import reach_demos, tiny_checkpoint

from policies.checkpoint import load_policy
from robotrl.algos.kept_agent import best_evaluation
from robotrl.cli import compose, main
from robotrl.commands.train_rl import run_train_rl
from robotrl.metrics import read_csv


@pytest.fixture(scope="module")
def reach_base(tmp_path_factory):
    root = tmp_path_factory.mktemp("flowrl")
    return tiny_checkpoint(root, reach_demos(root), "batch_size=32", "num_steps=6")


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["flow_sde", "grpo"])
def test_train_rl_flow_algos_end_to_end(tmp_path, reach_base, algo):
    out = run_train_rl(
        compose(
            "train_rl",
            [
                f"checkpoint={reach_base}",
                f"algo={algo}",
                "num_envs=2",
                "total_steps=240",
                "eval_every=120",
                "eval_episodes=2",
                "flow_pg.rollout_env_steps=120",
                "flow_pg.group_size=2",
                "flow_pg.minibatch_size=16",
                "flow_pg.epochs=1",
                "flow_pg.critic_warmup_iters=1",  # 2 rollouts: the second updates the policy
                "flow_pg.num_steps=3",
                "videos=1",
                f"output_dir={tmp_path}",
                "progress=false",
            ],
        )
    )
    assert out["algo"] == algo and out["task"] == "reach" and out["num_envs"] == 2
    assert out["env_steps"] >= 240 and out["num_steps"] == 3
    assert 0.0 <= out["final_success"] <= 1.0
    rows = read_csv(out["metrics"])
    assert rows[0]["env_steps"] == 0 and len(rows) >= 3
    # the summary's final result is the last evaluation, at the step it was taken
    assert out["final_success"] == rows[-1]["success_rate"]
    assert out["final_eval_step"] == rows[-1]["env_steps"] >= 240 and not out["final_is_base"]
    assert all("wall_s" in r and "success_rate" in r for r in rows)
    for png in out["plots"]:
        with open(png, "rb") as f:
            assert f.read(4) == b"\x89PNG"
    assert len(out["videos"]) == 1 and out["videos"][0].endswith(".mp4")
    policy, meta = load_policy(out["checkpoint"])
    assert policy.num_steps == 3 and meta["rl"]["algo"] == algo
    assert meta["rl"]["env_steps"] == out["env_steps"]
    # the checkpoint holds the policy of the best evaluation (robotrl.algos.kept_agent's rule)
    best = best_evaluation([r["success_rate"] for r in rows])
    assert out["kept_step"] == rows[best]["env_steps"]


@pytest.mark.slow
def test_flow_algos_train_and_evaluate_on_the_chosen_simulator(tmp_path, reach_base, monkeypatch):
    pytest.importorskip("pybullet")
    import sim

    made, real = [], sim.make_vec

    def spy(task, num_envs, **kwargs):
        made.append(kwargs)
        return real(task, num_envs, **kwargs)

    monkeypatch.setattr(sim, "make_vec", spy)
    out = run_train_rl(
        compose(
            "train_rl",
            [
                f"checkpoint={reach_base}",
                "algo=flow_sde",
                "backend=pybullet",
                "total_steps=120",
                "eval_every=120",
                "eval_episodes=1",
                "flow_pg.rollout_env_steps=60",
                "flow_pg.minibatch_size=16",
                "flow_pg.critic_warmup_iters=1",
                "videos=1",
                f"output_dir={tmp_path}",
                "progress=false",
            ],
        )
    )
    assert out["env_steps"] >= 120
    assert len(made) == 2  # the training envs and the evaluation envs, both in PyBullet
    assert all(kw["backend"] == "pybullet" and kw["controller"] == "impedance" for kw in made)
    assert len(out["videos"]) == 1  # rendered by PyBullet too


def test_flow_algos_refuse_unsupported_settings(tmp_path, reach_base):
    args = ["train-rl", f"checkpoint={reach_base}", f"output_dir={tmp_path}", "progress=false"]
    assert main([*args, "algo=flow_noise", "role=split"]) == 2
    assert main([*args, "algo=flow_noise", "human=scripted"]) == 2
    assert main([*args, "algo=ppo"]) == 2
    assert main([*args, "algo=flow_sde", "backend=ros2"]) == 2  # a robot is not num_envs processes


def test_a_budget_within_the_critic_warm_up_is_refused_up_front(tmp_path, reach_base, capsys):
    args = ["train-rl", f"checkpoint={reach_base}", f"output_dir={tmp_path}", "progress=false"]
    budget = ["total_steps=240", "flow_pg.rollout_env_steps=120", "num_envs=2"]
    assert main([*args, "algo=flow_sde", *budget]) == 2  # train_rl.yaml: 3 critic-only rollouts
    err = capsys.readouterr().err
    assert "total_steps=240 ends before the policy is updated" in err
    assert "flow_pg.critic_warmup_iters=3" in err and "e.g. total_steps=480" in err
    assert main([*args, "algo=grpo", "total_steps=100", *budget[1:]]) == 2
    assert "smaller than one rollout (flow_pg.rollout_env_steps=120)" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # no run dir was made
