from robotrl.policy_env import with_backend


def test_with_backend_maps_the_native_controller_for_other_simulators():
    kw = {"controller": "native"}
    assert with_backend(kw, "mujoco") is kw
    assert with_backend(kw, "pybullet") == {"controller": "impedance", "backend": "pybullet"}
    assert with_backend({"controller": "osc"}, "pybullet")["controller"] == "osc"
    assert kw == {"controller": "native"}  # the caller's dict is left alone
