"""robotrl distill end to end on a tiny reach dataset and teacher."""

import json

import pytest

from policies.checkpoint import load_policy
from robotrl.cli import compose, main
from robotrl.commands.collect import run_collect
from robotrl.commands.train_bc import run_train_bc


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    root = tmp_path_factory.mktemp("distill")
    store = root / "reach.zarr"
    run_collect(
        compose(
            "collect", ["task=reach", "device=expert", "episodes=4", f"out={store}", "viewer=off"]
        )
    )
    out = run_train_bc(
        compose(
            "train_bc",
            [
                f"dataset={store}",
                "steps=20",
                "batch_size=32",
                "hidden=32",
                "num_steps=4",
                "eval_episodes=0",
                "val_ratio=0.25",
                f"output_dir={root}",
                "progress=false",
            ],
        )
    )
    return out["checkpoint"], store


@pytest.mark.slow
def test_distill_writes_a_student_and_compares_it_with_the_teacher(tmp_path, teacher, capsys):
    ckpt, store = teacher
    rc = main(
        [
            "distill",
            f"checkpoint={ckpt}",
            f"dataset={store}",
            "steps=10",
            "batch_size=32",
            "eval_episodes=1",
            "latency_calls=3",
            "threads=1",
            f"output_dir={tmp_path}",
            "progress=false",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["command"] == "distill" and out["steps"] == 10 and out["task"] == "reach"
    assert out["teacher"]["latency"]["network_evals"] == 4
    assert out["student"]["latency"]["network_evals"] == 1
    for who in ("teacher", "student"):
        assert out[who]["episodes"] == 1 and 0.0 <= out[who]["success_rate"] <= 1.0
    assert out["val_match_mse"] >= 0.0
    student, meta = load_policy(out["checkpoint"])
    assert student.policy_type == "distilled" and meta["task"] == "reach"
    assert meta["teacher_checkpoint"] == ckpt and meta["distill_steps"] == 10


def test_distill_rejects_a_non_teacher(tmp_path, teacher, capsys):
    ckpt, store = teacher
    common = [
        f"dataset={store}",
        "steps=2",
        "batch_size=8",
        "eval_episodes=0",
        "threads=1",
        "latency_calls=1",
        f"output_dir={tmp_path}",
        "progress=false",
    ]
    main(["distill", f"checkpoint={ckpt}", *common])
    student = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["checkpoint"]
    assert main(["distill", f"checkpoint={student}", *common]) == 2
    assert "flow or diffusion" in capsys.readouterr().err
    assert main(["distill", f"checkpoint={tmp_path / 'none'}", *common]) == 2
