"""Latency benchmark helpers: timing statistics, network evaluations per chunk, the LeRobot
subprocess (unavailable interpreter reported, real one under -m lerobot)."""

import sys
from pathlib import Path

import pytest
import torch

from policies.diffusion import DiffusionPolicy
from policies.distillation import DistilledPolicy
from policies.flow_matching import FlowMatchingPolicy
from robotrl.benchmarks.policy_latency import (
    chunk_latency,
    lerobot_latency,
    network_calls_per_chunk,
    time_calls,
    time_interleaved,
    vla_latency,
)
from robotrl.cli import compose

LEROBOT_PY = Path("/work/.venv-lerobot/bin/python")
KW = {
    "state_dims": {"state/x": 3},
    "action_dim": 2,
    "action_horizon": 4,
    "hidden": 16,
    "obs_feature_dim": 16,
}
OBS = {"state/x": torch.zeros(1, 2, 3)}


def test_time_calls_counts_and_orders_percentiles():
    n = []
    out = time_calls(lambda: n.append(1), calls=7, warmup=2)
    assert len(n) == 9 and out["calls"] == 7
    assert 0 <= out["median_ms"] <= out["p90_ms"]
    with pytest.raises(ValueError):
        time_calls(lambda: None, calls=0)


def test_time_interleaved_calls_each_function_in_turn():
    order = []
    out = time_interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, 3, 1)
    assert order == ["a", "b"] * 4
    assert set(out) == {"a", "b"} and out["a"]["calls"] == 3


def test_network_evaluations_per_chunk():
    flow = FlowMatchingPolicy(**KW, num_steps=4)
    assert network_calls_per_chunk(flow, OBS) == 4
    assert network_calls_per_chunk(DiffusionPolicy(**KW, num_inference_steps=5), OBS) == 5
    student = DistilledPolicy.from_teacher(flow)
    out = chunk_latency(student, OBS, calls=2, warmup=0)
    assert out["network_evals"] == 1
    assert out["params"] == sum(p.numel() for p in student.parameters())


def test_missing_or_failing_lerobot_interpreter_is_reported(tmp_path):
    cfg = {"threads": 1}
    out = lerobot_latency(str(tmp_path / "nope"), 3, 1, cfg)
    assert out == {"available": False, "reason": f"no lerobot interpreter at {tmp_path / 'nope'}"}
    out = lerobot_latency(sys.executable, 3, 1, cfg)  # bad args -> the script fails
    assert out["available"] is False and out["reason"].startswith("exit 1")


@pytest.mark.lerobot
@pytest.mark.skipif(not LEROBOT_PY.is_file(), reason="no lerobot venv")
def test_lerobot_diffusion_policy_is_timed_in_its_own_venv():
    cfg = {
        "obs_horizon": 2,
        "action_horizon": 8,
        "action_dim": 2,
        "down_dims": [16, 32],
        "ddim_steps": 2,
        "calls": 2,
        "warmup": 1,
        "threads": 1,
        "seed": 0,
    }
    out = lerobot_latency(str(LEROBOT_PY), 3, 2, cfg)
    assert out["available"] is True, out
    assert out["network_evals"] == 2 and out["params"] > 0 and out["median_ms"] > 0


def test_the_vla_is_timed_at_the_recipe_size_on_its_own_threads():
    cfg = compose("bench_latency", ["calls=2", "warmup=0", "vla.num_steps=3"])
    before = torch.get_num_threads()
    out = vla_latency(cfg)
    assert out["network_evals"] == 3 and out["threads"] == 1 and out["calls"] == 2
    assert out["params"] > 100_000 and out["median_ms"] > 0
    torch.set_num_threads(before)
