"""Instructed envs: the instruction is an observation entry (Text space) and reset info, vector
envs batch it as a tuple of str, and only instructed tasks get it."""

import gymnasium as gym
import numpy as np
import pytest

import sim
from sim.instructed_env import LANGUAGE_KEY, InstructedPandaEnv
from sim.tasks.lift import LiftTask


def test_observation_space_holds_the_instruction():
    env = sim.make("pick_color")
    assert isinstance(env, InstructedPandaEnv)
    space = env.observation_space[LANGUAGE_KEY]
    assert isinstance(space, gym.spaces.Text)
    obs, info = env.reset(seed=0)
    assert space.contains(obs[LANGUAGE_KEY]) and info[LANGUAGE_KEY] == env.instruction
    obs, *_ = env.step(np.zeros(7, np.float32))
    assert obs[LANGUAGE_KEY] == env.instruction
    assert env.observation_space.contains(obs)


def test_tasks_without_instructions_are_unchanged():
    env = sim.make("lift")
    assert not isinstance(env, InstructedPandaEnv)
    obs, info = env.reset(seed=0)
    assert LANGUAGE_KEY not in obs and LANGUAGE_KEY not in info
    with pytest.raises(ValueError, match="InstructedTask"):
        InstructedPandaEnv(LiftTask())


def test_vector_env_batches_instructions():
    venv = sim.make_vec("pick_color", 2, workers=1)
    try:
        obs, _ = venv.reset(seed=5)
        singles = []
        for i in range(2):
            env = sim.make("pick_color")
            singles.append(env.reset(seed=5 + i)[0][LANGUAGE_KEY])
        assert tuple(obs[LANGUAGE_KEY]) == tuple(singles)
        obs, *_ = venv.step(np.zeros((2, 7), np.float32))
        assert tuple(obs[LANGUAGE_KEY]) == tuple(singles)
    finally:
        venv.close()
