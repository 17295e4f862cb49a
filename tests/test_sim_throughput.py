import json

import pytest

from robotrl.benchmarks.sim_throughput import run_sim_benchmark
from robotrl.cli import compose


@pytest.mark.slow
def test_bench_sim_reports_scaling_ceiling_and_cameras(tmp_path):
    cfg = compose(
        "bench_sim",
        [
            "num_envs=[1,2]",
            "gym_async_envs=[2]",
            "rounds=2",
            "slice_s=0.05",
            "raw_steps=500",
            "camera_sizes=[32]",
            f"plot={tmp_path / 'scaling.png'}",
        ],
    )
    out = run_sim_benchmark(cfg)
    json.dumps(out)  # the CLI prints it as one JSON line
    assert out["physics_hz"] == 500 and out["control_hz"] == 20
    bound = out["raw_mj_steps_per_s"] / 25
    assert abs(out["raw_bound_env_steps_per_s"] - bound) / bound < 0.01
    assert out["env_steps_per_s_1env"] > 0 and out["ceiling_2procs_over_1env"] > 0
    assert set(out["speedup_over_1env"]) == {1, 2} and out["workers"][1] == 1
    assert all(v > 0 for v in out["speedup_over_1env"].values())
    assert out["gym_async_speedup_over_1env"][2] > 0
    cam = out["cameras"]["32"]
    assert cam["frames_per_s_obs"] > 0 and cam["frames_per_s_full"] > 0
    assert cam["env_steps_per_s_2cams"] > 0
    assert (tmp_path / "scaling.png").stat().st_size > 0
