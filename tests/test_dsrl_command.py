"""train-rl algo=dsrl end to end on a tiny reach base: checkpoint, metrics CSV, curves, video,
JSON fields; robotrl eval runs the checkpoint on its base; bad settings are one-line errors."""

import pytest
from tiny_reach import evaluate_checkpoint, reach_demos, tiny_checkpoint

from robotrl.algos.dsrl import is_dsrl_checkpoint, load_steered_policy
from robotrl.algos.kept_agent import best_evaluation
from robotrl.cli import compose
from robotrl.commands.train_rl import run_train_rl
from robotrl.metrics import read_csv


@pytest.fixture(scope="module")
def reach(tmp_path_factory):
    root = tmp_path_factory.mktemp("dsrl")
    demos = reach_demos(root)
    return tiny_checkpoint(root, demos, "batch_size=32", "num_steps=3"), demos


def _cfg(tmp_path, ckpt, *extra):
    return compose(
        "train_rl",
        [
            f"checkpoint={ckpt}",
            "algo=dsrl",
            "total_steps=160",
            "warmup_steps=80",
            "eval_every=80",
            "eval_episodes=2",
            "dsrl.hidden=32",
            "dsrl.batch_size=16",
            "dsrl.utd=1",
            f"output_dir={tmp_path}",
            "progress=false",
            *extra,
        ],
    )


@pytest.mark.slow
def test_train_rl_dsrl_end_to_end_and_eval(tmp_path, reach):
    ckpt, demos = reach
    out = run_train_rl(_cfg(tmp_path, ckpt, f"demos={demos}", "videos=1", "num_envs=2"))
    assert out["algo"] == "dsrl" and out["task"] == "reach"
    assert out["env_steps"] == 160 and 0.0 <= out["final_success"] <= 1.0
    rows = read_csv(out["run_dir"] + "/metrics.csv")
    assert [r["env_steps"] for r in rows] == [0, 80, 160]
    assert out["final_success"] == rows[-1]["success_rate"] and not out["final_is_base"]
    assert "q_mean" in rows[-1] and "entropy_per_dim" in rows[-1]
    best = best_evaluation([r["success_rate"] for r in rows])
    assert out["kept_step"] == rows[best]["env_steps"]  # the agent of the best evaluation
    with open(out["plot"], "rb") as f:
        assert f.read(4) == b"\x89PNG"
    assert len(out["videos"]) == 1 and out["videos"][0].endswith(".mp4")
    assert is_dsrl_checkpoint(out["checkpoint"]) and not is_dsrl_checkpoint(ckpt)
    policy, meta = load_steered_policy(out["checkpoint"])
    assert meta["task"] == "reach" and not policy.explore
    ev = evaluate_checkpoint(out["checkpoint"], tmp_path)
    assert ev["episodes"] == 2 and 0.0 <= ev["success_rate"] <= 1.0


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["role=learner"], "one process"),
        (["human=scripted"], "human"),
        (["total_steps=80"], "warmup_steps"),
        (["backend=ros2"], "simulation"),
        (["obs_keys=[state/not_a_key]"], "state keys"),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path, reach, extra, match):
    with pytest.raises(ValueError, match=match):
        run_train_rl(_cfg(tmp_path, reach[0], *extra))
