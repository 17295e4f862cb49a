"""pick_color: the instruction names the cube, the expert lifts the named one for both
instructions, lifting the other one is no success, placements keep the cubes apart."""

import numpy as np
import pytest
from episodes import run_episode

import sim
from robotrl.evaluation import evaluate
from sim.tasks.lift import CUBE_HALF, LIFT_HEIGHT
from sim.tasks.pick_color import MIN_SEPARATION, PickColorExpert, target_color


def test_expert_succeeds_on_both_instructions():
    env = sim.make("pick_color")
    expert = sim.make_expert("pick_color", env)
    by_instruction: dict[str, list[bool]] = {}
    for seed in range(200, 224):
        obs, info = run_episode(env, expert, seed)
        by_instruction.setdefault(env.instruction, []).append(bool(info["success"]))
        named = target_color(env.instruction)
        other = "green" if named == "red" else "red"
        if info["success"]:
            assert obs[f"state/{named}_pos"][2] > CUBE_HALF + LIFT_HEIGHT
            assert obs[f"state/{other}_pos"][2] < CUBE_HALF + 0.01
    assert set(by_instruction) == {"lift the red cube", "lift the green cube"}
    for instruction, results in by_instruction.items():
        assert np.mean(results) >= 0.95, (instruction, results)


def test_lifting_the_other_cube_is_no_success():
    env = sim.make("pick_color")

    class WrongCube(PickColorExpert):
        def __call__(self, obs):
            other = "green" if target_color(str(obs["language"])) == "red" else "red"
            return super().__call__({**obs, "language": f"lift the {other} cube"})

    res = evaluate(env, WrongCube(), 6, seed=300, progress=False)
    assert res.success_rate == 0.0


def test_instruction_and_placement_follow_the_seed():
    env = sim.make("pick_color")
    seen = set()
    for seed in range(12):
        obs, info = env.reset(seed=seed)
        assert obs["language"] == info["language"] == env.instruction
        assert env.instruction in env.task.instructions
        seen.add(env.instruction)
        gap = np.linalg.norm(obs["state/red_pos"][:2] - obs["state/green_pos"][:2])
        assert gap >= MIN_SEPARATION - 1e-6
        again, _ = env.reset(seed=seed)
        assert again["language"] == obs["language"]
        np.testing.assert_array_equal(again["state/red_pos"], obs["state/red_pos"])
    assert len(seen) == 2


def test_target_color_parsing():
    assert target_color("Lift the red cube.") == "red"
    assert target_color("lift the GREEN cube") == "green"
    for bad in ("lift the cube", "lift the red and the green cube", "lift the redder cube"):
        with pytest.raises(ValueError, match="exactly one"):
            target_color(bad)
