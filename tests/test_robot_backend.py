"""backend=ros2: the robot env of a sim task over ROS 2 topics for ``robotrl eval`` /
``robotrl train-rl``. Config precedence and refusals; over an in-memory transport the env has the
task's horizon and action scales, and a reward classifier takes over reward, termination and
success; over DDS on loopback against a ``robotrl-sim-robot`` process the scripted expert and a
checkpoint (``robotrl eval backend=ros2``) give the episodes of the in-process MuJoCo run."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")

from ros2_fakes import FakeTransport, LockstepSim
from waits import eventually

import sim
from hardware.ros2 import messages as m
from hardware.ros2.topics import SIM, ConfigError
from robotrl.evaluation import evaluate
from robotrl.nodes.robot_backend import RobotEnvConfig, load_config, make_ros2
from robotrl.policy_env import check_one_robot, with_backend

pytestmark = pytest.mark.ros2

CAMERA = "/camera/front/image_raw"


def _params(tmp_path: Path, **params) -> str:
    import yaml

    f = tmp_path / "env.yaml"
    f.write_text(yaml.safe_dump({"robotrl_robot_env": {"ros__parameters": params}}))
    return str(f)


def test_config_file_then_overrides(tmp_path) -> None:
    f = _params(tmp_path, profile="generic", control_hz=10, lockstep=True, domain_id=5)
    cfg = load_config(f)
    assert (cfg.profile, cfg.control_hz, cfg.lockstep, cfg.domain_id) == ("generic", 10.0, True, 5)
    cfg = load_config(f, profile="sim", domain_id=7)
    assert (cfg.profile, cfg.domain_id, cfg.control_hz) == ("sim", 7, 10.0)
    assert load_config().profile == "franka" and load_config().max_episode_steps == 0
    with pytest.raises(ConfigError, match=r"unknown parameters \['rate'\]"):
        load_config(_params(tmp_path, rate=3))
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "nope.yaml"))
    with pytest.raises(ConfigError, match="control_hz must be positive"):
        RobotEnvConfig(control_hz=0.0)


def test_cli_options_reach_the_backend_and_one_robot_is_enforced() -> None:
    kw = with_backend(
        {"controller": "native"}, "ros2", {"profile": "sim", "domain_id": None, "params_file": None}
    )
    assert kw == {"controller": "impedance", "backend": "ros2", "profile": "sim"}
    assert "profile" not in with_backend({}, "pybullet", {"profile": "sim"})
    check_one_robot("ros2", 1)
    check_one_robot("mujoco", 4, 2)
    with pytest.raises(ValueError, match="num_envs=1"):
        check_one_robot("ros2", 2)
    with pytest.raises(ValueError, match="does not take \\['safety', 'safety_kwargs'\\]"):
        make_ros2("reach", transport=FakeTransport(), safety="monitor", safety_kwargs={})


def test_env_of_the_task_over_topics_and_classifier_rewards(tmp_path) -> None:
    """Lockstep sim on the in-memory bus: the env has the task's horizon and scales; with a
    reward classifier (here one that always fires) reward, end and success follow it."""
    bus = FakeTransport()
    robot = LockstepSim(bus, task="reach")
    params = _params(tmp_path, profile="sim", via_bridge=True, lockstep=True)
    env = sim.make("reach", backend="ros2", params_file=params, transport=bus)
    try:
        assert env.max_episode_steps == 50 and env.max_dpos == 0.02  # the reach task's
        assert set(env.observation_space.spaces) >= {"state/goal_pos", "state/ee_pos"}
        expert = sim.make_expert("reach", env)
        res = evaluate(env, expert, 2, seed=3, progress=False)
        ref_env = sim.make("reach")
        ref = evaluate(ref_env, sim.make_expert("reach", ref_env), 2, seed=3, progress=False)
        assert res.successes == ref.successes == [True, True] and res.lengths == ref.lengths
    finally:
        env.close()

    # a classifier that always says success: reward 1 and the end at the first step, although
    # the robot's oracle says the goal is not reached yet
    import torch

    from robotrl.algos.reward_classifier import RewardClassifier, save_reward_classifier

    clf = RewardClassifier(["images/front"], image_size=(8, 8), feature_dim=4, hidden=8)
    with torch.no_grad():
        clf.head[-1].weight.zero_()
        clf.head[-1].bias.fill_(5.0)
    save_reward_classifier(clf, tmp_path / "clf")
    params = _params(
        tmp_path,
        profile="sim",
        via_bridge=True,
        lockstep=True,
        topics={"cameras": {"front": CAMERA}},
    )
    image = bus.publisher(CAMERA, m.Image)

    def camera(msg: m.Float64MultiArray) -> None:  # a frame with every state stamp
        sec, nsec = int(msg.data[6]), int(msg.data[7])
        header = m.Header(stamp=m.Time(sec=sec, nanosec=nsec), frame_id="cam")
        data = [0] * (8 * 8 * 3)
        image.publish(
            m.Image(header=header, height=8, width=8, encoding="rgb8", step=24, data=data)
        )

    bus.subscribe(SIM.episode, m.Float64MultiArray, camera)
    env = sim.make(
        "reach",
        backend="ros2",
        params_file=params,
        transport=bus,
        reward_classifier=str(tmp_path / "clf"),
    )
    try:
        obs, _ = env.reset(seed=4)
        assert obs["images/front"].shape == (8, 8, 3)
        _, reward, terminated, truncated, info = env.step(np.zeros(7))
        assert reward == 1.0 and terminated and not truncated
        assert info["success"] and not info["oracle_success"] and info["classifier_prob"] > 0.99
    finally:
        env.close()
        robot.close()


def test_a_reset_by_another_env_ends_the_episode(tmp_path) -> None:
    """One robot, two envs (a rollout env and an evaluation env): once the second resets the
    robot, the first sends nothing more and ends its episode, truncated and interrupted."""
    bus = FakeTransport()
    robot = LockstepSim(bus, task="reach")
    params = _params(tmp_path, profile="sim", via_bridge=True, lockstep=True)
    rollout, evaluation = (make_ros2("reach", params_file=params, transport=bus) for _ in "ab")
    try:
        rollout.reset(seed=1)
        assert not rollout.step(np.zeros(7))[4]["interrupted"]
        evaluation.reset(seed=2)
        evaluation.step(np.zeros(7))
        sent = len(bus.sent[SIM.action])
        _, reward, terminated, truncated, info = rollout.step(np.zeros(7))
        assert truncated and not terminated and reward == 0.0 and info["hold"]
        assert "reset to seed 2 (this episode: 1)" in info["interrupted"]
        assert len(bus.sent[SIM.action]) == sent  # nothing reached the robot
        rollout.reset(seed=3)  # a new episode acts again
        assert not rollout.step(np.zeros(7))[4]["interrupted"]
        assert len(bus.sent[SIM.action]) == sent + 1
    finally:
        rollout.close()
        evaluation.close()
        robot.close()


def test_lockstep_hold_sends_no_extra_step(tmp_path, monkeypatch) -> None:
    """A lockstep robot left waiting (a learner pausing between steps) holds without being sent
    its last target again: every re-sent pose would step the sim robot once more."""
    from hardware.ros2 import robot_env

    monkeypatch.setattr(robot_env, "LOCKSTEP_TIMEOUT_S", 0.2)
    bus = FakeTransport()
    robot = LockstepSim(bus, task="reach")  # answers resets; steps only on ``action``
    env = make_ros2(
        "reach", params_file=_params(tmp_path, profile="sim", lockstep=True), transport=bus
    )
    try:
        env.reset(seed=1)
        _, _, _, _, info = env.step(np.zeros(7))  # a pose goes out; nobody steps on it
        assert info["hold"] and len(bus.sent[SIM.equilibrium_pose]) == 1
        assert eventually(lambda: env.watchdog.held)  # no state for 0.2 s: the watchdog holds
        env.watchdog.tick()  # one more check while held: still nothing re-sent
        assert env.watchdog.held and len(bus.sent[SIM.equilibrium_pose]) == 1
    finally:
        env.close()
        robot.close()


def _json(text: str) -> dict:
    return json.loads([ln for ln in text.splitlines() if ln.startswith("{")][-1])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    from robotrl.cli import compose
    from robotrl.commands.collect import run_collect
    from robotrl.commands.train_bc import run_train_bc

    root = tmp_path_factory.mktemp("ros2_eval")
    store = root / "reach.zarr"
    run_collect(
        compose(
            "collect", ["task=reach", "device=expert", "episodes=4", f"out={store}", "viewer=off"]
        )
    )
    out = run_train_bc(
        compose(
            "train_bc",
            [
                *(f"dataset={store}", "steps=200", "batch_size=32", "eval_episodes=0"),
                *("hidden=32", "depth=1", f"output_dir={root}", "progress=false"),
            ],
        )
    )
    return out["checkpoint"]


@pytest.mark.slow
def test_eval_over_dds_matches_in_process(tmp_path, checkpoint) -> None:
    """``robotrl-sim-robot`` (lockstep on equilibrium poses) as a process; the scripted expert on
    ``sim.make(backend="ros2")`` and ``robotrl eval backend=ros2`` of a checkpoint, both over
    Cyclone DDS on loopback, give the success and lengths of the in-process runs, same seeds."""
    from hardware.ros2.transport import loopback_config
    from robotrl.cli import compose
    from robotrl.commands.eval import run_eval

    os.environ.setdefault("CYCLONEDDS_URI", loopback_config())
    domain = random.randint(1, 230)
    env_vars = {**os.environ, "ROS_DOMAIN_ID": str(domain), "OMP_NUM_THREADS": "1"}
    env_vars["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env_vars.get("PATH", "")
    robot = subprocess.Popen(
        [
            *("robotrl-sim-robot", "--ros-args", "-p", "profile:=sim", "-p", "task:=reach"),
            *("-p", "lockstep:=true", "-p", "lockstep_on:=equilibrium_pose"),
        ],
        env=env_vars,
        stdout=subprocess.PIPE,
        text=True,
    )
    params = _params(tmp_path, profile="sim", lockstep=True)
    try:
        # expert-like policy: every episode succeeds, at the same step as in process
        t0 = time.monotonic()
        env = sim.make("reach", backend="ros2", params_file=params, domain_id=domain)
        try:
            res = evaluate(env, sim.make_expert("reach", env), 4, seed=500, progress=False)
        finally:
            env.close()
        dds_s = time.monotonic() - t0
        ref_env = sim.make("reach")
        ref = evaluate(ref_env, sim.make_expert("reach", ref_env), 4, seed=500, progress=False)
        print(f"expert over DDS: {res.successes} {res.lengths} in {dds_s:.1f} s")
        assert res.successes == ref.successes == [True] * 4
        assert res.lengths == ref.lengths

        # the checkpoint through the robotrl CLI (a process of its own), same seeds
        common = [f"checkpoint={checkpoint}", "episodes=3", "seed=700", "progress=false"]
        common += [f"output_dir={tmp_path}"]
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "robotrl.cli", "eval", *common, "backend=ros2"),
                *(f"ros2.params_file={params}", f"ros2.domain_id={domain}"),
            ],
            env=env_vars,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        over_dds = _json(proc.stdout)
        in_proc = run_eval(compose("eval", [*common, "videos=0"]))
        print("eval over DDS:", over_dds, "in process:", in_proc)
        assert over_dds["backend"] == "ros2" and over_dds["episodes"] == 3
        assert over_dds["videos"] == []
        for key in ("success_rate", "mean_length", "mean_return"):
            assert over_dds[key] == in_proc[key], key
    finally:
        robot.terminate()
        out, _ = robot.communicate(timeout=120)  # loaded machines take over 30 s
    stats = _json(out)
    # 4 expert + 3 checkpoint episodes: one reset and one step per env step, nothing else
    assert stats["resets"] >= 7
    assert stats["commands"] == sum(res.lengths) + round(3 * in_proc["mean_length"])


@pytest.mark.slow
def test_train_rl_runs_on_the_robot_env(tmp_path, checkpoint) -> None:
    """``robotrl train-rl backend=ros2`` (residual RL, scripted human, a few hundred steps) on a
    lockstep ``robotrl-sim-robot`` process (stepping on the normalised actions, ``via_bridge``,
    ``lockstep_on:=action``: ``PandaEnv.step`` itself): the run completes and its step-0
    evaluation equals the in-process one. The training episodes differ: that evaluation resets
    the one robot under the rollout's first episode, which the env then ends (``interrupted``),
    where a sim gives the evaluation a world of its own."""
    from hardware.ros2.transport import loopback_config
    from robotrl.cli import compose
    from robotrl.commands.train_rl import run_train_rl

    os.environ.setdefault("CYCLONEDDS_URI", loopback_config())
    domain = random.randint(1, 230)
    env_vars = {**os.environ, "ROS_DOMAIN_ID": str(domain), "OMP_NUM_THREADS": "1"}
    env_vars["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env_vars.get("PATH", "")
    robot = subprocess.Popen(
        [
            *("robotrl-sim-robot", "--ros-args", "-p", "profile:=sim", "-p", "task:=reach"),
            *("-p", "lockstep:=true", "-p", "lockstep_on:=action"),
        ],
        env=env_vars,
        stdout=subprocess.PIPE,
        text=True,
    )
    params = _params(tmp_path, profile="sim", lockstep=True, via_bridge=True)
    common = [
        *(f"checkpoint={checkpoint}", "human=scripted", "total_steps=200", "warmup_steps=50"),
        *("critic_warmup_updates=10", "eval_every=200", "eval_episodes=2", "videos=0"),
        *("residual.hidden=32", "residual.ensemble=2", "residual.utd=1", "residual.batch_size=32"),
        *(f"output_dir={tmp_path}", "progress=false"),
    ]
    try:
        over_dds = run_train_rl(
            compose(
                "train_rl",
                [*common, "backend=ros2", f"ros2.params_file={params}", f"ros2.domain_id={domain}"],
            )
        )
    finally:
        robot.terminate()
        robot.communicate(timeout=120)  # loaded machines take over 30 s
    in_proc = run_train_rl(compose("train_rl", common))
    print("train-rl over DDS:", over_dds, "in process:", in_proc)
    assert over_dds["env_steps"] == in_proc["env_steps"] == 200
    assert over_dds["episodes"] >= 4 and in_proc["episodes"] >= 4
    assert over_dds["base_success"] == in_proc["base_success"]
    assert over_dds["intervention_rate_first_20"] > 0  # the scripted human took over
