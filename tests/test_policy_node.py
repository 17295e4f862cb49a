"""Policy node: a checkpoint runs seeded episodes on the robot env at the policy rate, through
the commander (or a bridge); a VLA reads the sim robot's cameras and its instruction; the
console script entry runs over DDS and prints its summary."""

from __future__ import annotations

import json
import os
import random
import threading

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")

from ros2_fakes import FakeTransport

from hardware.ros2 import messages as m
from hardware.ros2.config import PolicyNodeConfig, SimRobotConfig
from hardware.ros2.topics import SIM
from policies.checkpoint import save_policy
from policies.registry import make_policy
from robotrl.nodes import policy_node
from robotrl.nodes.policy_node import PolicyNode
from robotrl.nodes.sim_robot_node import SimRobotNode

pytestmark = pytest.mark.ros2  # needs cyclonedds (the message structs)


def _checkpoint(path, keys: dict[str, int]) -> str:
    policy = make_policy("flow", state_dims=keys, hidden=32, depth=1, obs_feature_dim=32)
    return str(save_policy(policy, path, meta={"task": "reach", "execute_horizon": 4}))


def _sim(bus, **kw) -> tuple[SimRobotNode, threading.Thread]:
    node = SimRobotNode(SimRobotConfig(profile="sim", task="reach", state_hz=200.0, **kw), bus)
    thread = threading.Thread(target=node.run, daemon=True)
    thread.start()
    return node, thread


KEYS = {"state/ee_pos": 3, "state/goal_pos": 3}


def _run(node: PolicyNode, sim_node: SimRobotNode, thread: threading.Thread):
    """Run the policy node's episodes, then stop it and the sim robot."""
    try:
        return node.run()
    finally:
        node.close()
        sim_node.close()
        thread.join(timeout=5)


def _cfg(ckpt: str, **kw) -> PolicyNodeConfig:
    base = dict(profile="sim", checkpoint=ckpt, control_hz=20.0, policy_hz=20.0)
    # the watchdog is not under test here: a bound a loaded machine's scheduler cannot miss
    base.update(max_episode_steps=6, episodes=2, seed=7, state_timeout_s=2.0)
    base.update(kw)
    return PolicyNodeConfig(**base)


def test_a_vla_acts_on_the_cameras_and_the_instruction_of_the_sim_robot(tmp_path) -> None:
    from tiny_vla import tiny_vla

    from sim.tasks.tabletop import ALL_FAMILIES, instructions_of

    INSTRUCTIONS = instructions_of(ALL_FAMILIES)
    vla = tiny_vla(
        {"state/ee_pos": 3, "state/gripper": 1},
        INSTRUCTIONS,
        action_dim=7,
        obs_horizon=1,
        num_steps=2,
        max_tokens=16,
        image_keys=["images/table", "images/wrist"],
        image_channels=(8, 8, 8, 8),
    )
    env_meta = {"controller": "native", "cameras": ["table", "wrist"], "image_size": [24, 32]}
    ckpt = save_policy(vla, tmp_path / "vla", {"task": "tabletop", "execute_horizon": 2,
                                               "env": env_meta})  # fmt: skip
    bus = FakeTransport()
    sim_cfg = SimRobotConfig(
        profile="sim", task="tabletop", lockstep=True, lockstep_on="equilibrium_pose",
        cameras=("table", "wrist"), image_size=(24, 32),
    )  # fmt: skip
    sim_node = SimRobotNode(sim_cfg, bus)
    thread = threading.Thread(target=sim_node.run, daemon=True)
    thread.start()
    node = PolicyNode(_cfg(str(ckpt), lockstep=True, max_episode_steps=3, task=""), bus)
    seen: list[dict] = []
    inner = node.runner

    class Spy:  # the observations the policy is given
        def reset(self) -> None:
            inner.reset()

        def __call__(self, obs: dict) -> np.ndarray:
            seen.append(obs)
            return inner(obs)

    node.runner = Spy()  # type: ignore[assignment]
    stats = _run(node, sim_node, thread)
    told = [msg.data for msg in bus.sent[SIM.instruction]][-2:]  # the sim's, one per episode
    assert stats.lengths == [3, 3] and stats.instructions == told
    assert all(t in INSTRUCTIONS for t in told)
    assert seen[0]["images/table"].shape == (24, 32, 3) and seen[0]["language"] == told[0]
    assert seen[-1]["language"] == told[1]
    assert stats.summary()["instructions"] == told


@pytest.mark.parametrize("via_bridge", [False, True])
def test_episodes_run_at_the_policy_rate(tmp_path, via_bridge: bool) -> None:
    ckpt = _checkpoint(tmp_path / "ckpt", KEYS)
    bus = FakeTransport()
    if via_bridge:  # stands in for the bridge's action reader
        bus.subscribe(SIM.action, m.Float64MultiArray, lambda msg: None)
    sim_node, thread = _sim(bus)
    node = PolicyNode(_cfg(ckpt, via_bridge=via_bridge), bus)
    stats = _run(node, sim_node, thread)
    summary = stats.summary()
    assert stats.seeds == [7, 8] and stats.lengths == [6, 6]
    assert summary["episodes"] == 2 and summary["success_ci95"][1] <= 1.0
    # chunks of 4 executed open loop: 2 inferences per 6-step episode, the rest are queue pops
    assert len(stats.inference_ms) == 12
    resets = [int(msg.data[0]) for msg in bus.sent[SIM.reset]]
    assert resets[-2:] == [7, 8]
    if via_bridge:
        assert len(bus.sent[SIM.action]) == 12 and SIM.equilibrium_pose not in bus.sent
    else:
        assert len(bus.sent[SIM.equilibrium_pose]) >= 12 and SIM.action not in bus.sent
        acts = [np.asarray(g.data) for g in bus.sent[SIM.gripper_command]]
        assert all(0.0 <= a[0] <= 0.08 for a in acts)  # widths, as the commander sends them


def test_policy_keys_the_robot_lacks_are_an_error(tmp_path) -> None:
    ckpt = _checkpoint(tmp_path / "ckpt", {"state/cube_pos": 3})
    with pytest.raises(ValueError, match=r"reads \['state/cube_pos'\]"):
        PolicyNode(_cfg(ckpt), FakeTransport())


def test_console_script_over_dds(tmp_path, capsys) -> None:
    from hardware.ros2.transport import CycloneTransport, loopback_config

    os.environ.setdefault("CYCLONEDDS_URI", loopback_config())
    domain = random.randint(1, 230)
    ckpt = _checkpoint(tmp_path / "ckpt", KEYS)
    tr = CycloneTransport(domain, "sim_robot")
    sim_node, thread = _sim(tr)
    try:
        code = policy_node.main(
            [
                "--ros-args",
                "-r",
                "__node:=pn",
                "-p",
                "profile:=sim",
                "-p",
                f"domain_id:={domain}",
                "-p",
                f"checkpoint:={ckpt}",
                "-p",
                "policy_hz:=20.0",
                "-p",
                "control_hz:=20.0",
                "-p",
                "episodes:=1",
                "-p",
                "max_episode_steps:=5",
                "-p",
                "seed:=3",
                "-p",
                "state_timeout_s:=0.2",
            ]
        )
    finally:
        sim_node.close()
        thread.join(timeout=5)
        tr.close()
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and out["node"] == "pn"
    assert out["episodes"] == 1 and out["mean_length"] == 5.0
    assert sim_node.stats.commands >= 5  # the equilibrium poses reached the sim robot
