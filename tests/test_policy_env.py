import pytest
from tiny_reach import reach_demos, tiny_checkpoint

from robotrl.algos.residual_policy import ZeroPolicy
from robotrl.policy_env import frozen_base, with_backend


def test_with_backend_maps_the_native_controller_for_other_simulators():
    kw = {"controller": "native"}
    assert with_backend(kw, "mujoco") is kw
    assert with_backend(kw, "pybullet") == {"controller": "impedance", "backend": "pybullet"}
    assert with_backend({"controller": "osc"}, "pybullet")["controller"] == "osc"
    assert kw == {"controller": "native"}  # the caller's dict is left alone


def test_run_env_kwargs_apply_backend_and_safety_and_refuse_a_robot_to_sim_only_commands():
    from omegaconf import OmegaConf

    from robotrl.policy_env import run_env_kwargs

    meta = {"controller": "native"}
    cfg = OmegaConf.create({"backend": "pybullet", "safety": "monitor"})
    kw = run_env_kwargs(cfg, meta)
    assert kw["backend"] == "pybullet" and kw["controller"] == "impedance"
    assert kw["safety"] == "monitor"
    assert run_env_kwargs(OmegaConf.create({}), meta) == {"controller": "native"}
    robot = OmegaConf.create({"backend": "ros2", "ros2": {"profile": "sim", "domain_id": None}})
    assert run_env_kwargs(robot, meta)["profile"] == "sim"  # its non-null ros2 entries
    with pytest.raises(ValueError, match="algo=dsrl trains in simulation"):
        run_env_kwargs(robot, meta, sim_only="algo=dsrl")


def test_imports_without_the_config_stack():
    """The lerobot venv (robotrl installed without its dependencies) rolls policies out through
    this module, and has no omegaconf or hydra."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['omegaconf'] = None; sys.modules['hydra'] = None\n"
        "import robotrl.policy_env"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_frozen_base_runs_from_its_mean_noise_on_the_checkpoints_task(tmp_path):
    ckpt = tiny_checkpoint(tmp_path, reach_demos(tmp_path, episodes=2))
    cfg = {"checkpoint": ckpt, "base_noise_scale": None, "task": None}
    base = frozen_base(cfg)
    assert (base.task, base.noise_scale, base.execute_horizon) == ("reach", 0.0, 8)
    assert frozen_base({**cfg, "base_noise_scale": 1.0}).noise_scale == 1.0
    zero = frozen_base(cfg, ZeroPolicy)  # no sampler: it runs as it is
    assert isinstance(zero.policy, ZeroPolicy) and zero.noise_scale == 1.0
    assert frozen_base({**cfg, "task": "lift"}).task == "lift"
