"""robotrl train-reward end to end on a synthetic store (red square = success)."""

import json

import pytest
from reward_synthetic import write_store

from robotrl.algos.reward_classifier import load_reward_classifier
from robotrl.algos.reward_labels import load_frames
from robotrl.cli import main
from robotrl.datasets import EpisodeStore


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("data") / "syn.zarr", episodes=20, length=10)


@pytest.mark.slow
def test_train_reward_cli_reports_held_out_metrics_and_saves(tmp_path, store, capsys):
    args = [
        "train-reward",
        f"dataset={store}",
        "cameras=[front]",
        "state_keys=[state/x]",
        "positive_window=3",
        "ignore_before=0",
        "steps=60",
        "batch_size=32",
        "lr=3e-3",
        "eval_every=30",
        "hidden=32",
        f"output_dir={tmp_path}",
        "progress=false",
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["episodes"] == {"train": 12, "val": 4, "test": 4, "test_successes": 2}
    assert out["frames"]["test"] == {"positive": 6, "negative": 38, "ignored": 0}
    assert 0.5 <= out["threshold"] < 1.0
    frames = out["test"]["frames"]
    assert set(frames) >= {"precision", "recall", "f1", "accuracy", "average_precision"}
    assert frames["tp"] + frames["fn"] == 6 and frames["fp"] + frames["tn"] == 38
    assert set(out["test"]["episodes"]) >= {"fired_in_successes", "fired_in_failures"}
    with open(out["plot"], "rb") as f:
        assert f.read(4) == b"\x89PNG"
    model, meta = load_reward_classifier(out["checkpoint"])
    assert model.threshold == pytest.approx(out["threshold"])
    assert not set(meta["test_episodes"]) & set(meta["train_episodes"] + meta["val_episodes"])
    # the checkpoint reproduces the reported test metrics
    s = EpisodeStore.open(store)
    test = load_frames(s, meta["test_episodes"], model.keys, positive_window=3)
    fired = model.predict_proba(test.obs) >= model.threshold
    assert int((fired & (test.labels == 1)).sum()) == frames["tp"]


@pytest.mark.parametrize(
    ("override", "message"),
    [("cameras=[wrist]", "has no ['images/wrist']"), ("cameras=[]", "needs cameras")],
)
def test_train_reward_cli_bad_inputs(tmp_path, store, capsys, override, message):
    assert main(["train-reward", f"dataset={store}", override, f"output_dir={tmp_path}"]) == 2
    assert message in capsys.readouterr().err
