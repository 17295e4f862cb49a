"""The quickstart pipeline end to end on a tiny budget: every stage runs and the report exists."""

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from policies.checkpoint import load_policy
from robotrl.cli import compose
from robotrl.commands.quickstart import run_quickstart, weakest_family


@pytest.mark.slow
def test_quickstart_runs_every_stage_and_writes_a_report(tmp_path):
    cfg = compose(
        "quickstart",
        [
            "expert_episodes=2",
            "demos=3",
            "bc_steps=20",
            "bc_batch_size=32",
            "eval_episodes=2",
            "videos=1",
            "rl_steps=300",
            "rl_warmup_steps=100",
            "rl_eval_every=300",
            "residual.batch_size=32",
            "residual.hidden=32",
            f"output_dir={tmp_path}",
            "progress=false",
        ],
    )
    s = run_quickstart(cfg)
    json.dumps(s)  # the summary is one JSON line
    assert s["expert_success"] == 1.0 and s["demos"] == 3
    assert 0.0 <= s["success_before"] <= 1.0 and 0.0 <= s["success_after"] <= 1.0
    assert s["rl_env_steps"] >= 300
    lo, hi = s["success_after_ci95"]
    assert 0.0 <= lo <= s["success_after"] <= hi <= 1.0
    report = Path(s["report"])
    text = report.read_text()
    assert "| + residual RL |" in text and "Intervention rate" in text
    assert "with a scripted human" in text and s["human"] == "scripted"
    # every linked file exists (curves and videos are relative to the report)
    import re

    links = re.findall(r"\]\(([^)]+\.(?:png|mp4))\)", text)
    assert any(x.endswith(".png") for x in links) and any(x.endswith(".mp4") for x in links)
    for link in links:
        assert (report.parent / link).is_file(), link


@pytest.mark.slow
def test_the_vla_recipe_runs_every_stage_and_reports_per_family(tmp_path):
    cfg = compose(
        "quickstart",
        [
            "recipe=vla",
            "expert_episodes=1",
            "vla.demos=4",
            "vla.image_size=[32,32]",
            "vla.bc_steps=10",
            "vla.batch_size=16",
            "vla.eval_episodes=2",
            "vla.rl_steps=160",
            "vla.rl_warmup_steps=80",
            "vla.rl_eval_every=160",
            "vla.rl_eval_episodes=1",
            "videos=0",
            f"output_dir={tmp_path}",
            "progress=false",
        ],
    )
    s = run_quickstart(cfg)
    json.dumps(s)
    assert s["recipe"] == "vla" and s["demos"] == 4 and s["rl_env_steps"] >= 160
    # the recipe's VLA runs 12 of each chunk's 16 actions: recorded in its checkpoint
    assert s["execute_horizon"] == 12
    (bc_checkpoint,) = [
        p for p in Path(s["run_dir"]).glob("**/checkpoint") if "train-bc" in str(p.parent)
    ]
    assert load_policy(bc_checkpoint)[1]["execute_horizon"] == 12
    # RL runs as docs/vla.md measured it: the VLA sampling its noise, the actor at lr 1e-5
    (rl_config,) = [
        p for p in Path(s["run_dir"]).glob("**/config.yaml") if p.parent.name.endswith("train-rl")
    ]
    rl_cfg = OmegaConf.load(rl_config)
    assert rl_cfg.base_noise_scale == 1.0 and rl_cfg.residual.actor_lr == 1e-5
    for split in ("seen", "held_out", "family_before_rl", "family_after_rl"):
        assert 0.0 <= s[split]["success"] <= 1.0 and s[split]["families"]
    assert set(s["held_out"]["families"]) <= {"lift/blue", "place/green"}
    # RL trains on the weakest family alone; before and after are that family only
    rates = {**s["seen"]["families"], **s["held_out"]["families"]}
    assert rates[s["rl_family"]] == min(rates.values())
    assert set(s["family_before_rl"]["families"]) == {s["rl_family"]}
    assert set(s["family_after_rl"]["families"]) == {s["rl_family"]}
    assert s["rl_kept_step"] in (0, 160)
    text = Path(s["report"]).read_text()
    assert "| seen | all |" in text and "| held out | all |" in text
    assert f"## Residual RL on the weakest family, {s['rl_family']}" in text


def test_the_weakest_family_is_the_lowest_over_both_splits():
    seen, held_out = {"lift/red": 0.9, "place/red": 0.5}, {"place/green": 0.5, "lift/blue": 0.7}
    assert weakest_family(seen, held_out) == "place/green"  # the first by name among equals
    with pytest.raises(ValueError, match="no family"):
        weakest_family({}, {})


def test_a_stage_stopped_by_ctrl_c_stops_the_recipe(monkeypatch, capsys):
    import robotrl.commands.quickstart as quickstart

    ran = []

    def stage(cfg):
        ran.append(cfg.dataset)
        return {"interrupted": True, "run_dir": "outputs/bc"}

    monkeypatch.setitem(quickstart.STAGES, "train_bc", stage)
    with pytest.raises(KeyboardInterrupt):  # the CLI reports it and exits 130
        quickstart._stage("bc", "train_bc", {"dataset": "lift.zarr"})
    assert ran == ["lift.zarr"]
    assert "[quickstart] bc: stopped, its run is in outputs/bc" in capsys.readouterr().err
