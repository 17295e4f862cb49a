"""robotrl eval with safety=reflex: counts of the guard in the JSON, bad options rejected."""

import numpy as np
import pytest
from reflex_weights import pushing_down_low_critic
from tiny_reach import reach_demos, tiny_checkpoint

from robotrl.cli import compose
from robotrl.commands.eval import run_eval
from robotrl.policy_env import safety_env_kwargs


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    return tiny_checkpoint(root, reach_demos(root))


@pytest.mark.slow
def test_eval_with_reflex_reports_guard_counts(tmp_path, checkpoint):
    critic = tmp_path / "critic.npz"
    np.savez(critic, **pushing_down_low_critic(z_limit=2.0))  # vetoes every downward command
    common = [f"checkpoint={checkpoint}", "episodes=2", "videos=0", "progress=false"]
    out = run_eval(
        compose(
            "eval",
            [*common, f"output_dir={tmp_path}", "safety=reflex", f"safety_critic={critic}"],
        )
    )
    c = out["safety_counts"]
    assert out["safety"] == "reflex" and c["steps"] == round(out["mean_length"] * 2)
    assert c["violation_steps"] == 0 and "filter_step_limited" in c
    off = run_eval(compose("eval", [*common, f"output_dir={tmp_path}"]))
    assert off["safety"] == "off" and "safety_counts" not in off


def test_noise_scale_is_validated_and_zero_repeats_episodes(tmp_path, checkpoint):
    common = [f"checkpoint={checkpoint}", "episodes=2", "videos=0", "progress=false"]
    common.append(f"output_dir={tmp_path}")
    with pytest.raises(ValueError, match="noise_scale must be a finite value >= 0"):
        run_eval(compose("eval", [*common, "noise_scale=-1"]))
    a = run_eval(compose("eval", [*common, "noise_scale=0"]))
    b = run_eval(compose("eval", [*common, "noise_scale=0"]))
    assert a["mean_return"] == b["mean_return"] and a["mean_length"] == b["mean_length"]


def test_safety_options_are_validated(tmp_path):
    assert safety_env_kwargs("off") == {}
    assert safety_env_kwargs("monitor") == {"safety": "monitor", "safety_kwargs": {}}
    with pytest.raises(ValueError, match="safety must be one of"):
        safety_env_kwargs("on")
    with pytest.raises(ValueError, match="needs safety_critic"):
        safety_env_kwargs("reflex")
    critic = tmp_path / "c.npz"
    w = pushing_down_low_critic()
    w["feature_names"] = np.array(["ee_pos", "ee_vel", "force", "gripper", "task/goal"])
    np.savez(critic, **w)
    kw = safety_env_kwargs("reflex", str(critic), 0.2)
    assert kw["safety_kwargs"] == {"critic": str(critic), "task_keys": ("goal",), "threshold": 0.2}


def test_an_rl_agent_keeps_the_te_it_was_trained_with():
    from robotrl.commands.eval import _trained_te

    assert _trained_te({"execute_horizon": 8}, None, "the residual") == 8
    assert _trained_te({"execute_horizon": 8}, 8, "the residual") == 8
    with pytest.raises(ValueError, match="the residual was trained with execute_horizon=8"):
        _trained_te({"execute_horizon": 8}, 4, "the residual")
