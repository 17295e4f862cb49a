import ast

import numpy as np
import pytest

import sim
from sim.registry import BACKENDS, EXPERTS, TASKS


def test_every_task_has_an_expert_and_builds():
    assert set(TASKS) == set(EXPERTS) >= {"reach", "lift", "peg_insert"}
    for name in TASKS:
        env = sim.make(name)
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        assert sim.make_expert(name, env).max_dpos == env.max_dpos


def test_unknown_task_lists_the_available_ones():
    with pytest.raises(ValueError, match="available"):
        sim.make("stack")
    with pytest.raises(ValueError, match="available"):
        sim.make_vec("stack", 2)
    with pytest.raises(ValueError, match="num_envs"):
        sim.make_vec("lift", 0)


def test_an_instructed_task_restricted_to_families_draws_only_those():
    env = sim.make("tabletop:place/blue")
    expert = sim.make_expert("tabletop:place/blue", env)
    families = set()
    for seed in range(6):
        env.reset(seed=seed)
        families.add(env.task.family)
    assert families == {"place/blue"}
    assert sim.registry.task_horizon("tabletop:place/blue") == env.max_episode_steps
    assert expert.max_dpos == env.max_dpos
    two = sim.make("tabletop:lift/red, lift/blue")
    drawn = set()
    for seed in range(12):
        two.reset(seed=seed)
        drawn.add(two.task.family)
    assert drawn == {"lift/red", "lift/blue"}
    with pytest.raises(ValueError, match="unknown families"):
        sim.make("tabletop:stack/red")
    with pytest.raises(ValueError, match="no instruction families"):
        sim.make("lift:place/blue")


def test_unknown_backend_lists_the_backend_names():
    for make in (
        lambda: sim.make("lift", backend="gazebo"),
        lambda: sim.make_vec("lift", 2, backend="gazebo"),
    ):
        with pytest.raises(ValueError) as err:
            make()
        head, _, available = str(err.value).partition("; available: ")
        assert head == "unknown backend 'gazebo'"
        # a plain sorted list of names (it once read "['mujoco', *['maniskill', ...]]")
        assert ast.literal_eval(available) == sorted({"mujoco", *BACKENDS})
        assert {"mujoco", "pybullet"} <= set(ast.literal_eval(available))


def test_vector_env_in_processes_matches_single_envs():
    venv = sim.make_vec("reach", 2, workers=2)
    try:
        obs, _ = venv.reset(seed=10)
        actions = np.tile(np.array([0.5, 0, 0, 0, 0, 0, -1], np.float32), (2, 1))
        obs, *_ = venv.step(actions)
    finally:
        venv.close()
    for i in range(2):
        env = sim.make("reach")
        o, _ = env.reset(seed=10 + i)
        o, *_ = env.step(actions[i])
        np.testing.assert_allclose(obs["state/ee_pos"][i], o["state/ee_pos"], atol=1e-6)
