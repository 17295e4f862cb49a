from robotrl.policy_env import with_backend


def test_with_backend_maps_the_native_controller_for_other_simulators():
    kw = {"controller": "native"}
    assert with_backend(kw, "mujoco") is kw
    assert with_backend(kw, "pybullet") == {"controller": "impedance", "backend": "pybullet"}
    assert with_backend({"controller": "osc"}, "pybullet")["controller"] == "osc"
    assert kw == {"controller": "native"}  # the caller's dict is left alone


def test_run_env_kwargs_apply_backend_and_safety_and_refuse_a_robot_to_sim_only_commands():
    import pytest
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
