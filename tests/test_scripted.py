"""ScriptedDevice replay and ExpertDevice driving the sim with a scripted expert."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from hardware.devices.device import TeleopCommand
from hardware.devices.scripted import ExpertDevice, ScriptedDevice


def action(x: float, gripper: float) -> np.ndarray:
    return np.array([x, 0, 0, 0, 0, 0, gripper], dtype=np.float32)


def test_replays_commands_then_idles_with_last_gripper() -> None:
    script = [
        TeleopCommand(action(0.5, -1), intervene=True),
        TeleopCommand(action(0.0, 1), intervene=False, events=frozenset({"success"})),
        action(-0.25, 1),  # plain arrays count as interventions
    ]
    with ScriptedDevice(script, quit_when_done=True) as dev:
        got = [dev.read() for _ in range(5)]
    assert [c.action[0] for c in got] == [0.5, 0.0, -0.25, 0.0, 0.0]
    assert [c.intervene for c in got] == [True, False, True, False, False]
    assert [c.events for c in got] == [set(), {"success"}, set(), {"quit"}, set()]
    assert [c.action[6] for c in got] == [-1, 1, 1, 1, 1]
    assert dev.done


def test_generator_is_consumed_lazily() -> None:
    produced = []

    def gen():
        for i in range(3):
            produced.append(i)
            yield action(i / 4, -1)

    with ScriptedDevice(gen()) as dev:
        assert produced == []
        assert dev.read().action[0] == 0.0
        assert produced == [0]
        dev.read(), dev.read()
        assert dev.read().events == frozenset()  # quit_when_done defaults to False


def test_bad_script_entries_raise() -> None:
    with ScriptedDevice([np.zeros(3)]) as dev, pytest.raises(ValueError, match="shape"):
        dev.read()


class Recorder:
    def __init__(self) -> None:
        self.seen: list[int] = []
        self.resets = 0

    def __call__(self, obs: dict) -> np.ndarray:
        self.seen.append(obs["t"])
        return np.array([2.0, -3.0, 0.1, 0, 0, 0, 0.7])

    def reset(self) -> None:
        self.resets += 1


def test_expert_acts_on_observed_obs_clipped_and_always_intervenes() -> None:
    expert = Recorder()
    with ExpertDevice(expert) as dev:
        with pytest.raises(RuntimeError, match="observe"):
            dev.read()
        dev.observe({"t": 7})
        cmd = dev.read()
    np.testing.assert_allclose(cmd.action, [1.0, -1.0, 0.1, 0, 0, 0, 0.7], atol=1e-7)
    assert cmd.intervene and cmd.events == frozenset()
    assert expert.seen == [7]
    dev.reset()
    assert expert.resets == 1


def test_expert_validation() -> None:
    with pytest.raises(TypeError, match="callable"):
        ExpertDevice(42)  # type: ignore[arg-type]
    with ExpertDevice(lambda obs: np.full(7, np.nan)) as dev:
        dev.observe({})
        with pytest.raises(ValueError, match="finite"):
            dev.read()


def test_expert_device_drives_reach_in_sim() -> None:
    env = sim.make("reach", controller="native")
    obs, _ = env.reset(seed=0)
    info = {"success": False}
    with ExpertDevice(sim.make_expert("reach", env)) as dev:
        dev.reset()
        for _ in range(150):
            dev.observe(obs)
            cmd = dev.read()
            assert cmd.intervene
            obs, _, terminated, truncated, info = env.step(cmd.action)
            if terminated or truncated:
                break
    assert info["success"]
