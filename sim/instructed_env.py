"""Language-conditioned tasks: the task draws an instruction at every reset and the env shows it.

An :class:`InstructedTask` picks ``instruction`` (one of ``instructions``) in ``reset``;
:class:`InstructedPandaEnv` adds it to the observation as ``obs["language"]`` (a str; the
observation space holds a ``gymnasium.spaces.Text`` there, so vector envs batch it as a tuple
of str) and to the reset ``info``. Recorders store it as the episode's ``language`` metadata and
keep it out of the per-step arrays; VLA policies tokenise it (``robotrl/chunk_runner.py``).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from sim.env import PandaEnv
from sim.task import Task

LANGUAGE_KEY = "language"  # observation entry of the instruction
MAX_INSTRUCTION_CHARS = 128
INSTRUCTION_CHARSET = string.ascii_letters + string.digits + " ,.;:'-!?"


@dataclass
class InstructedTask(Task):
    """A task whose goal is named by an instruction drawn at reset.

    Attributes:
        instructions: the instructions the task can draw.
        instruction: the current one (set by ``reset``).
    """

    instructions: tuple[str, ...] = ()
    instruction: str = ""

    def family_of(self, instruction: str) -> str:
        """The group an instruction belongs to for per-family results (default: itself)."""
        return instruction


class InstructedPandaEnv(PandaEnv):
    """:class:`~sim.env.PandaEnv` whose observation also carries ``language`` (str)."""

    task: InstructedTask

    def __init__(self, task: InstructedTask, **kwargs: Any) -> None:
        if not isinstance(task, InstructedTask) or not task.instructions:
            raise ValueError("InstructedPandaEnv needs an InstructedTask with instructions")
        super().__init__(task, **kwargs)
        self.observation_space = gym.spaces.Dict(
            {
                **self.observation_space.spaces,
                LANGUAGE_KEY: gym.spaces.Text(
                    MAX_INSTRUCTION_CHARS, min_length=0, charset=INSTRUCTION_CHARSET
                ),
            }
        )

    @property
    def instruction(self) -> str:
        """The instruction of the current episode."""
        return self.task.instruction

    def observe(self) -> dict[str, Any]:
        obs: dict[str, Any] = super().observe()
        obs[LANGUAGE_KEY] = self.task.instruction
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        return obs, {**info, LANGUAGE_KEY: self.task.instruction}
