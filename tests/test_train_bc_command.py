"""train-bc and eval end to end on a tiny reach dataset (a few seconds)."""

import json

import pytest
from interrupts import interrupt_at_row
from tiny_vla import TABLETOP_VLA_BC

from policies.checkpoint import load_policy
from robotrl.cli import compose, main
from robotrl.commands.collect import run_collect
from robotrl.commands.train_bc import run_train_bc
from sim.tasks.tabletop import COLORS, PHRASINGS


@pytest.fixture(scope="module")
def reach_store(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "reach.zarr"
    run_collect(
        compose(
            "collect", ["task=reach", "device=expert", "episodes=6", f"out={out}", "viewer=off"]
        )
    )
    return out


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["flow", "diffusion"])
def test_train_bc_writes_checkpoint_curves_and_json(tmp_path, reach_store, policy):
    cfg = compose(
        "train_bc",
        [
            f"dataset={reach_store}",
            f"policy={policy}",
            "steps=40",
            "batch_size=32",
            "eval_episodes=2",
            "eval_every=20",
            "hidden=32",
            f"output_dir={tmp_path}",
            "progress=false",
            "val_ratio=0.2",
        ],
    )
    out = run_train_bc(cfg)
    assert out["task"] == "reach" and out["steps"] == 40 and out["episodes"] == 5
    assert 0.0 <= out["success_rate"] <= 1.0 and out["val_loss"] > 0
    assert out["final_success"] == out["success_rate"] and out["final_eval_step"] == 40
    policy_obj, meta = load_policy(out["checkpoint"])
    assert meta["task"] == "reach" and meta["execute_horizon"] == 8
    assert policy_obj.policy_type == policy
    assert (tmp_path / out["run_dir"].split(str(tmp_path))[-1].lstrip("/") / "metrics.csv").exists()
    with open(out["plot"], "rb") as f:
        assert f.read(4) == b"\x89PNG"
    assert len(out["videos"]) == 1


def test_a_ctrl_c_stops_training_and_keeps_the_checkpoint(
    tmp_path, reach_store, capsys, monkeypatch
):
    """The first Ctrl-C ends training after its current step: the checkpoint holds the weights
    of that step, the JSON says so, no video is recorded, and the exit code is 130."""
    interrupt_at_row(monkeypatch, 1)  # the evaluation at step 20
    args = [f"dataset={reach_store}", "steps=40", "batch_size=32", "eval_episodes=1"]
    args += ["eval_every=20", "hidden=32", f"output_dir={tmp_path}", "progress=false"]
    assert main(["train-bc", *args]) == 130
    captured = capsys.readouterr()
    assert "train-bc: stopping at the next step" in captured.err
    out = json.loads(captured.out.strip().splitlines()[-1])
    assert out["interrupted"] is True and out["steps"] == 20 and out["videos"] == []
    assert out["final_eval_step"] == 20  # no evaluation at the end
    assert load_policy(out["checkpoint"])[1]["train_steps"] == 20


def test_keep_checkpoints_saves_each_intermediate_evaluation(tmp_path, reach_store):
    cfg = compose(
        "train_bc",
        [
            f"dataset={reach_store}",
            "steps=30",
            "batch_size=32",
            "eval_episodes=0",  # no rollouts: the checkpoints are still kept
            "eval_every=10",
            "keep_checkpoints=true",
            "hidden=32",
            "videos=0",
            f"output_dir={tmp_path}",
            "progress=false",
        ],
    )
    out = run_train_bc(cfg)
    run_dir = out["run_dir"]  # absolute
    for step in (10, 20):
        _, meta = load_policy(f"{run_dir}/checkpoint_{step}")
        assert meta["train_steps"] == step and meta["task"] == "reach"
    assert load_policy(out["checkpoint"])[1]["train_steps"] == 30
    assert not (tmp_path / run_dir / "checkpoint_30").exists()  # the last one is "checkpoint"


@pytest.mark.slow
def test_eval_cli_parallel_envs(tmp_path, reach_store, capsys):
    cfg = compose(
        "train_bc",
        [
            f"dataset={reach_store}",
            "steps=20",
            "batch_size=32",
            "eval_episodes=0",
            "hidden=32",
            f"output_dir={tmp_path}",
            "progress=false",
        ],
    )
    ckpt = run_train_bc(cfg)["checkpoint"]
    rc = main(
        [
            "eval",
            f"checkpoint={ckpt}",
            "episodes=4",
            "num_envs=2",
            "videos=1",
            "video_size=[48,64]",
            f"output_dir={tmp_path}",
            "progress=false",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["episodes"] == 4 and out["num_envs"] == 2 and len(out["videos"]) == 1
    lo, hi = out["success_ci95"]
    assert lo <= out["success_rate"] <= hi


def test_bad_inputs_are_clear_errors(tmp_path, reach_store, capsys):
    assert main(["train-bc", f"dataset={tmp_path / 'none.zarr'}"]) == 2
    assert (
        main(
            [
                "train-bc",
                f"dataset={reach_store}",
                "obs_keys=[state/nope]",
                f"output_dir={tmp_path}",
            ]
        )
        == 2
    )
    assert "state/nope" in capsys.readouterr().err
    too_big = ["train-bc", f"dataset={reach_store}", "batch_size=100000", f"output_dir={tmp_path}"]
    assert main(too_big) == 2
    assert "fewer than batch_size=100000" in capsys.readouterr().err
    assert main(["train-bc", f"dataset={reach_store}", "steps=0", f"output_dir={tmp_path}"]) == 2
    assert "steps=0 trains nothing" in capsys.readouterr().err
    assert main(["eval", f"checkpoint={tmp_path}"]) == 2
    assert "no checkpoint" in capsys.readouterr().err


@pytest.mark.slow
def test_vla_trains_on_images_and_instructions_and_evaluates(tmp_path, capsys):
    store = tmp_path / "tabletop.zarr"
    run_collect(
        compose(
            "collect",
            [
                "task=tabletop_seen",
                "device=expert",
                "episodes=4",
                f"out={store}",
                "viewer=off",
                "cameras=[table]",
                "image_size=[32,32]",
            ],
        )
    )
    # eval_episodes=0 in TABLETOP_VLA_BC: the video rollout still runs it in the env
    overrides = [
        f"dataset={store}",
        *TABLETOP_VLA_BC,
        "steps=4",
        "batch_size=8",
        f"output_dir={tmp_path}",
        "val_ratio=0.25",
    ]
    out = run_train_bc(compose("train_bc", overrides))
    assert out["task"] == "tabletop_seen" and out["policy"] == "vla" and out["val_loss"] > 0
    assert len(out["videos"]) == 1
    policy, meta = load_policy(out["checkpoint"])
    assert meta["task"] == "tabletop_seen" and policy.policy_type == "vla"
    assert policy.config["dim"] == 32
    assert policy.config["aux_dims"] == {"state/target_pos": 3, "state/pad_pos": 3}
    grammar = {
        w for ps in PHRASINGS.values() for p in ps for w in p.format(c=" ".join(COLORS)).split()
    }
    assert "the" in policy.tokenizer.vocab and set(policy.tokenizer.vocab) <= grammar
    assert policy.config["image_keys"] == ["images/table"]
    rc = main(
        [
            "eval",
            f"checkpoint={out['checkpoint']}",
            "task=tabletop",
            "episodes=6",
            "videos=0",
            f"output_dir={tmp_path}",
            "progress=false",
        ]
    )
    assert rc == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["task"] == "tabletop" and res["episodes"] == 6
    assert sum(f["episodes"] for f in res["families"].values()) == 6
    assert set(res["families"]) <= {
        f"{v}/{c}" for v in ("lift", "place") for c in ("red", "green", "blue")
    }
    bad = [*overrides, "aux_keys=[state/ee_pos]"]
    assert main(["train-bc", *bad]) == 2
    assert "also in obs_keys" in capsys.readouterr().err
