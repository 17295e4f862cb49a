import threading

import numpy as np
import pytest
import torch
from recording_bar import RecordingBar

from policies.flow_matching import FlowMatchingPolicy
from robotrl.bc_training import BCConfig, _lr_lambda, train_bc, validation_loss
from robotrl.metrics import MetricsLogger


def _loader(n_batches=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.tensor([[0.5], [-0.3]])
    out = []
    for _ in range(n_batches):
        x = torch.randn(64, 2, 2, generator=g)
        a = torch.tanh(x[:, -1] @ w)[:, None].expand(64, 4, 1).clone()
        out.append({"obs": {"state/x": x}, "action": a})
    return out


def _policy():
    stats = {
        "state/x": {"mean": np.zeros(2), "std": np.ones(2)},
        "action": {"min": -np.ones(1), "max": np.ones(1)},
    }
    return FlowMatchingPolicy(
        {"state/x": 2}, action_dim=1, action_horizon=4, hidden=32, obs_feature_dim=32, stats=stats
    )


def test_training_lowers_validation_loss_and_logs(tmp_path):
    torch.manual_seed(0)
    p = _policy()
    val = _loader(2, seed=1)
    before = validation_loss(p, val)
    calls = []
    log = MetricsLogger(tmp_path / "m.csv")
    trained, summary = train_bc(
        p,
        _loader(),
        BCConfig(steps=300, eval_every=100, log_every=50, lr=3e-3),
        val_loader=val,
        evaluate=lambda pol: calls.append(1) or {"success_rate": 0.5},
        logger=log,
        progress=False,
    )
    assert summary["steps"] == 300 and len(calls) == 3  # at 100, 200 and the end
    assert summary["evaluations"][-1]["val_loss"] < 0.5 * before
    assert not trained.training
    assert len(log.series("step", "loss")[0]) == 6


def test_a_stop_request_ends_training_after_the_current_step():
    stop = threading.Event()
    calls = []

    def evaluate(pol):  # the evaluation at step 4 asks to stop
        calls.append(1)
        stop.set()
        return {"success_rate": 0.5}

    cfg = BCConfig(steps=12, eval_every=4, ema_decay=0)
    _, summary = train_bc(_policy(), _loader(), cfg, evaluate=evaluate, progress=False, stop=stop)
    assert summary["interrupted"] is True and summary["steps"] == 4
    assert len(calls) == 1  # no evaluation at the end
    _, full = train_bc(_policy(), _loader(), cfg, progress=False, stop=threading.Event())
    assert full["interrupted"] is False and full["steps"] == 12


def test_ema_lags_the_raw_weights():
    torch.manual_seed(0)
    p = _policy()
    ema, _ = train_bc(p, _loader(), BCConfig(steps=20, ema_decay=0.9, eval_every=0), progress=False)
    assert ema is not p
    diffs = [
        (a - b).abs().max().item() for a, b in zip(ema.parameters(), p.parameters(), strict=True)
    ]
    assert max(diffs) > 0


def test_lr_schedule_warms_up_then_decays():
    f = _lr_lambda(BCConfig(steps=1000, warmup=100))
    assert f(0) == pytest.approx(0.01) and f(99) == pytest.approx(1.0)
    assert f(550) == pytest.approx(0.5, abs=1e-2) and f(1000) == pytest.approx(0.0, abs=1e-6)


def test_non_finite_loss_stops_training():
    p = _policy()
    bad = [
        {"obs": {"state/x": torch.full((4, 2, 2), float("nan"))}, "action": torch.zeros(4, 4, 1)}
    ]
    with pytest.raises(FloatingPointError, match="non-finite"):
        train_bc(p, bad, BCConfig(steps=2, eval_every=0, ema_decay=0), progress=False)


def test_a_loader_without_batches_is_an_error_not_a_hang():
    with pytest.raises(ValueError, match="no batch"):
        train_bc(_policy(), [], BCConfig(steps=2, eval_every=0, ema_decay=0), progress=False)


def test_zero_steps_is_an_error_before_training():
    with pytest.raises(ValueError, match="steps=0 trains nothing: give steps >= 1"):
        train_bc(_policy(), _loader(1), BCConfig(steps=0), progress=False)


def test_progress_shows_train_and_eval_phases(monkeypatch):
    import robotrl.bc_training as bt

    monkeypatch.setattr(bt, "tqdm", RecordingBar)
    torch.manual_seed(0)
    _, summary = train_bc(
        _policy(),
        _loader(2),
        BCConfig(steps=6, eval_every=3, log_every=2, ema_decay=0),
        evaluate=lambda _p: {"success_rate": 0.25},
    )
    bar = RecordingBar.last
    assert bar.steps == [1] * 6
    assert bar.phases == ["train", "eval", "train", "eval", "done"]  # at step 3 and the end
    assert "success=0.25" in bar.postfix and [e["step"] for e in summary["evaluations"]] == [3, 6]
