"""Commander: the one action -> target conversion (delta from the measured pose, step bound,
gripper, NaN hold) and its inverse; the backends that share it agree on the targets."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from controllers.commander import STEP_BOUND, Commander
from controllers.rotations import mat_to_rotvec, rotvec_to_mat

ROOT = Path(__file__).resolve().parents[1]
DOWN = np.diag([1.0, -1.0, -1.0])
HOME = np.array([0.5, 0.0, 0.3])


def _at(dx: float, dy: float, dz: float) -> np.ndarray:
    return HOME + np.array([dx, dy, dz])


def _commander(**kw) -> Commander:
    cmd = Commander(**kw)
    cmd.reset(HOME, DOWN)
    return cmd


def test_action_moves_the_target_from_the_measured_pose() -> None:
    cmd = _commander(max_dpos=0.02, max_drot=0.1)
    t = cmd.command(np.array([1.0, -0.5, 0.0, 0.0, 0.0, 0.3, 1.0]), HOME, DOWN)
    np.testing.assert_allclose(t.pos, _at(0.02, -0.01, 0.0), atol=1e-12)
    np.testing.assert_allclose(t.rot, rotvec_to_mat(np.array([0, 0, 0.03])) @ DOWN, atol=1e-12)
    assert t.gripper == 1.0 and not any(t.flags.values())
    # relative to the measured pose, not the last target: a blocked arm does not wind up
    t = cmd.command(np.array([1.0, 0, 0, 0, 0, 0, 1.0]), HOME, DOWN)
    np.testing.assert_allclose(t.pos, _at(0.02, 0, 0), atol=1e-12)


def test_out_of_range_actions_are_clipped_and_steps_bounded() -> None:
    cmd = _commander(max_dpos=0.02, max_drot=0.1)
    t = cmd.command(np.array([5.0, 0, 0, 0, 0, 0, 3.0]), HOME, DOWN)
    np.testing.assert_allclose(t.pos, _at(0.02, 0, 0), atol=1e-12)
    assert t.gripper == 1.0
    # a measured pose far from the last safe target: the step bound holds the target back
    far = _at(0.2, 0.0, 0.0)
    t = cmd.command(np.zeros(7), far, DOWN)
    assert t.flags["step_limited"]
    np.testing.assert_allclose(np.linalg.norm(t.pos - _at(0.02, 0, 0)), STEP_BOUND * 0.02)


def test_non_finite_action_holds_target_and_gripper() -> None:
    cmd = _commander()
    good = cmd.command(np.array([0.5, 0, 0, 0, 0, 0, 1.0]), HOME, DOWN)
    for bad in (np.full(7, np.nan), np.array([0, 0, np.inf, 0, 0, 0, -1.0])):
        t = cmd.command(bad, _at(0.01, 0, 0), DOWN)
        assert t.flags["nan"]
        np.testing.assert_array_equal(t.pos, good.pos)
        np.testing.assert_array_equal(t.rot, good.rot)
        assert t.gripper == 1.0  # not opened by a NaN


class _Recorder:
    """An action stage that halves the motion and records what it saw."""

    FLAGS = ("halved",)

    def __init__(self) -> None:
        self.seen: list[tuple[np.ndarray, float]] = []
        self.resets: list[float] = []

    def reset(self, command: float) -> None:
        self.resets.append(command)

    def apply(self, action, ee_pos, opening):
        self.seen.append((action.copy(), opening))
        action[:6] *= 0.5
        return {"halved": True}


def test_action_stages_change_finite_actions_in_order_and_flag_it() -> None:
    first, second = _Recorder(), _Recorder()
    cmd = Commander(max_dpos=0.02, stages=[first])
    cmd.add_stage(second)
    cmd.reset(HOME, DOWN, gripper=1.0)
    assert first.resets == second.resets == [1.0]
    t = cmd.command(np.array([3.0, 0, 0, 0, 0, 0, -1.0]), HOME, DOWN, opening=0.04)
    np.testing.assert_allclose(t.pos, _at(0.005, 0, 0), atol=1e-12)  # clipped, then halved twice
    assert first.seen[0][0][0] == 1.0 and second.seen[0][0][0] == 0.5
    assert first.seen[0][1] == 0.04 and t.flags["halved"] and t.gripper == -1.0
    t = cmd.command(np.full(7, np.nan), HOME, DOWN, opening=0.04)  # held: no stage runs
    assert len(first.seen) == 1 and t.flags["nan"] and t.flags["halved"] is False
    with pytest.raises(ValueError, match="need the finger opening"):
        cmd.command(np.zeros(7), HOME, DOWN)


def test_grasp_hold_as_an_action_stage_keeps_a_held_object_closed() -> None:
    from controllers.grasp_hold import GraspHold

    cmd = Commander(stages=[GraspHold(release_z=0.08)])
    cmd.reset(HOME, DOWN, gripper=1.0)  # the episode starts holding (a peg in the hand)
    loosen = np.array([0, 0, 0.3, 0, 0, 0, 0.2])
    t = cmd.command(loosen, HOME, DOWN, opening=0.024)
    assert t.gripper == 1.0 and t.flags["grasp_hold"]
    low = np.array([0.5, 0.0, 0.05])  # below the release height: the command passes
    t = cmd.command(loosen, low, DOWN, opening=0.024)
    assert t.gripper == 0.2 and not t.flags["grasp_hold"]


def test_retarget_keeps_the_gripper() -> None:
    cmd = _commander()
    cmd.command(np.array([0, 0, 0, 0, 0, 0, 1.0]), HOME, DOWN)
    t = cmd.retarget(np.array([0, 0, 1.0, 0, 0, 0]), HOME, DOWN)
    assert t.gripper == 1.0
    np.testing.assert_allclose(t.pos, _at(0, 0, 0.02), atol=1e-12)


def test_to_action_inverts_command() -> None:
    cmd = _commander(max_dpos=0.02, max_drot=0.1)
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.uniform(-1, 1, 7)
        t = cmd.command(a, HOME, DOWN)
        back = cmd.to_action(t.pos, t.rot, HOME, DOWN)
        np.testing.assert_allclose(back[:3], a[:3], atol=1e-9)
        np.testing.assert_allclose(mat_to_rotvec(rotvec_to_mat(back[3:6] * 0.1)), a[3:6] * 0.1)
        assert back[6] == a[6]
        cmd.reset(HOME, DOWN)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="max_dpos"):
        Commander(max_dpos=0.0)
    with pytest.raises(ValueError, match=r"shape \(7,\)"):
        _commander().command(np.zeros(6), HOME, DOWN)


def test_the_conversion_and_step_bound_live_here_only() -> None:
    # every backend imports the Commander; no other module scales a delta by max_dpos onto a
    # measured pose or sets the filter's step bound
    delta = re.compile(r"pos \+ [^\n]*\[:3\][^\n]*\* [\w.]*max_dpos|max_pos_step=\s*\S+ \* ")
    hits = [
        str(p.relative_to(ROOT))
        for pkg in ("controllers", "sim", "hardware", "robotrl", "policies")
        for p in (ROOT / pkg).rglob("*.py")
        if delta.search(p.read_text())
    ]
    assert hits == ["controllers/commander.py"]
    text = (ROOT / "controllers" / "commander.py").read_text()
    assert len(delta.findall(text)) == 2  # the pattern does see the conversion and the bound


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_sim_backends_track_the_commanders_targets(backend) -> None:
    # a Commander of its own, fed the env's measured poses, predicts every target the env's
    # controller is given, NaN actions included
    if backend == "pybullet":
        pytest.importorskip("pybullet")
    import sim

    env = sim.make("lift", backend=backend, controller="impedance")
    given: list[tuple[np.ndarray, np.ndarray]] = []
    set_target = env.controller.set_target
    env.controller.set_target = lambda pos, rot: (given.append((pos, rot)), set_target(pos, rot))
    env.reset(seed=3)
    shadow = Commander(env.max_dpos, env.max_drot)
    shadow.reset(env.state.ee_pos, env.state.ee_rot)
    actions = np.random.default_rng(1).uniform(-1, 1, (12, 7))
    actions[5] = np.nan
    for a in actions:
        want = shadow.command(a, env.state.ee_pos, env.state.ee_rot)
        given.clear()
        env.step(a)
        ((pos, rot),) = given
        np.testing.assert_array_equal(pos, want.pos)
        np.testing.assert_array_equal(rot, want.rot)
    env.close()
