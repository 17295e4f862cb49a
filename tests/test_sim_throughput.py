from robotrl.benchmarks.sim_throughput import run_sim_benchmark
from robotrl.cli import compose


def test_bench_sim_reports_rates_and_ratio():
    cfg = compose("bench_sim", ["steps=40", "raw_steps=2000", "num_envs=2"])
    out = run_sim_benchmark(cfg)
    assert out["physics_hz"] == 500 and out["control_hz"] == 20
    for key in ("env_steps_per_s_1env", "env_steps_per_s_2envs", "raw_mj_steps_per_s"):
        assert out[key] > 0
    bound = out["raw_mj_steps_per_s"] / 25
    assert abs(out["raw_bound_env_steps_per_s"] - bound) / bound < 0.01
    assert 0 < out["ratio_1env_to_raw_bound"] <= 1.0
