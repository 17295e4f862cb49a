"""launch/*.launch.py: each parses and really runs ``generate_launch_description()`` against a
stub of the ROS 2 ``launch`` / ``launch_ros`` modules (they cannot be installed here); every
executable started is a console script of the package; every parameter file exists and loads
into the node's config (through the node's own command-line parser, with the launch file's
``-p`` overrides); every declared argument is documented in launch/README.md with its default."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from omegaconf import OmegaConf

from hardware.ros2.config import (
    BridgeConfig,
    ConfigError,
    NodeConfig,
    PolicyNodeConfig,
    RecorderConfig,
    SimRobotConfig,
    TeleopNodeConfig,
)
from robotrl.nodes.robot_backend import RobotEnvConfig, load_config

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch"
FILES = sorted(LAUNCH.glob("*.launch.py"))
NODE_CONFIGS: dict[str, type[NodeConfig]] = {
    "robotrl-bridge": BridgeConfig,
    "robotrl-policy-node": PolicyNodeConfig,
    "robotrl-teleop-node": TeleopNodeConfig,
    "robotrl-recorder-node": RecorderConfig,
    "robotrl-sim-robot": SimRobotConfig,
}
REQUIRED_VALUES = {"checkpoint": "outputs/ckpt"}  # values given to arguments without default


# ------------------------------------------------------------------ stub of launch / launch_ros
class _Entity:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs


class LaunchDescription(_Entity):
    @property
    def entities(self) -> list[Any]:
        return list(self.args[0]) if self.args else []


class DeclareLaunchArgument(_Entity):
    def __init__(
        self, name: str, *, default_value: Any = None, description: str = "", **kw: Any
    ) -> None:
        super().__init__(name, default_value=default_value, description=description, **kw)
        self.name, self.default_value, self.description = name, default_value, description


class ExecuteProcess(_Entity):
    pass


class RegisterEventHandler(_Entity):
    pass


class EmitEvent(_Entity):
    pass


class OnProcessExit(_Entity):
    pass


class Shutdown(_Entity):
    pass


class LaunchConfiguration:
    def __init__(self, name: str) -> None:
        self.name = name


class IfCondition:
    def __init__(self, predicate: Any) -> None:
        self.predicate = predicate


class UnlessCondition(IfCondition):
    pass


def _stub_modules() -> dict[str, types.ModuleType]:
    mods = {
        n: types.ModuleType(n)
        for n in (
            "launch",
            "launch.actions",
            "launch.substitutions",
            "launch.conditions",
            "launch.event_handlers",
            "launch.events",
            "launch_ros",
            "launch_ros.actions",
        )
    }
    mods["launch"].LaunchDescription = LaunchDescription
    mods["launch.actions"].DeclareLaunchArgument = DeclareLaunchArgument
    mods["launch.actions"].ExecuteProcess = ExecuteProcess
    mods["launch.actions"].RegisterEventHandler = RegisterEventHandler
    mods["launch.actions"].EmitEvent = EmitEvent
    mods["launch.event_handlers"].OnProcessExit = OnProcessExit
    mods["launch.events"].Shutdown = Shutdown
    mods["launch.substitutions"].LaunchConfiguration = LaunchConfiguration
    mods["launch.conditions"].IfCondition = IfCondition
    mods["launch.conditions"].UnlessCondition = UnlessCondition
    mods["launch_ros.actions"].Node = type("Node", (_Entity,), {})
    for name in ("actions", "substitutions", "conditions", "event_handlers", "events"):
        setattr(mods["launch"], name, mods[f"launch.{name}"])
    mods["launch_ros"].actions = mods["launch_ros.actions"]
    return mods


def _generate(path: Path) -> LaunchDescription:
    """Import ``path`` with the stub modules in sys.modules and run its generator."""
    saved = {n: sys.modules.get(n) for n in _stub_modules()}
    sys.modules.update(_stub_modules())
    try:
        spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.generate_launch_description()
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m


def _resolve(value: Any, env: dict[str, str]) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, LaunchConfiguration):
        return env[value.name]
    if isinstance(value, list | tuple):
        return "".join(_resolve(v, env) for v in value)
    raise TypeError(f"unexpected substitution {value!r}")


def _truthy(value: str) -> bool:
    if value.lower() not in ("true", "false", "1", "0"):
        raise ValueError(f"condition must be a boolean, got {value!r}")
    return value.lower() in ("true", "1")


def _processes(path: Path, overrides: dict[str, str] | None = None) -> list[tuple[str, list[str]]]:
    """(name, resolved cmd) of every process the launch file starts with ``overrides``."""
    ld = _generate(path)
    args = [e for e in ld.entities if isinstance(e, DeclareLaunchArgument)]
    env = {a.name: a.default_value for a in args}
    env.update({k: v for k, v in REQUIRED_VALUES.items() if k in env and env[k] is None})
    env.update(overrides or {})
    missing = [k for k, v in env.items() if v is None]
    assert not missing, f"{path.name}: arguments without a default or test value: {missing}"
    out = []
    for e in ld.entities:
        if not isinstance(e, ExecuteProcess):
            continue
        cond = e.kwargs.get("condition")
        if cond is not None:
            on = _truthy(_resolve(cond.predicate, env))
            if on == isinstance(cond, UnlessCondition):
                continue
        out.append((e.kwargs["name"], [_resolve(c, env) for c in e.kwargs["cmd"]]))
    return out


def _all_on(path: Path) -> dict[str, str]:
    """Overrides turning every boolean argument on (so every process is started)."""
    ld = _generate(path)
    return {
        a.name: "true"
        for a in ld.entities
        if isinstance(a, DeclareLaunchArgument) and a.default_value in ("true", "false")
    }


def _scripts() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


# ------------------------------------------------------------------ tests
def test_launch_files_exist_for_every_use() -> None:
    names = {p.name for p in FILES}
    assert names >= {
        "collect_teleop.launch.py",
        "policy_deploy.launch.py",
        "hil_rl_actor.launch.py",
        "sim_robot.launch.py",
    }


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_parses_and_defines_generator(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    funcs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert "generate_launch_description" in funcs
    ld = _generate(path)
    assert isinstance(ld, LaunchDescription)
    assert any(isinstance(e, ExecuteProcess) for e in ld.entities)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_executables_are_console_scripts(path: Path) -> None:
    scripts = _scripts()
    started = _processes(path, _all_on(path))
    assert started
    for name, cmd in started:
        assert cmd[0] in scripts, f"{path.name}: {name} runs {cmd[0]!r}, not in {sorted(scripts)}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_parameter_files_exist_and_load_into_node_configs(path: Path) -> None:
    checked = 0
    started = _processes(path) + _processes(path, _all_on(path))
    for name, cmd in started:
        if cmd[0] not in NODE_CONFIGS:
            continue
        files = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--params-file"]
        assert files, f"{name} gets no parameter file"
        for f in files:
            assert Path(f).is_file(), f"{name}: parameter file {f} does not exist"
        cfg, node = NODE_CONFIGS[cmd[0]].from_args(cmd[1:])
        assert node == name
        # the launch file's -p overrides land in the config with their default values
        for i, a in enumerate(cmd):
            if a == "-p":
                key, _, raw = cmd[i + 1].partition(":=")
                value = getattr(cfg, key)
                got = list(value) if isinstance(value, tuple) else value
                assert got == yaml.safe_load(raw) or str(value).lower() == raw.lower(), (key, raw)
        checked += 1
    if path.name != "hil_rl_actor.launch.py":
        assert checked >= 2
    else:  # its robotrl node is the sim robot (use_sim)
        assert checked == 1


def test_every_parameter_file_section_is_a_node_and_loads() -> None:
    by_node = {cls.NODE_NAME: cls for cls in [*NODE_CONFIGS.values(), RobotEnvConfig]}
    files = sorted((LAUNCH / "config").glob("*.yaml"))
    assert len(files) >= 3
    import yaml

    for f in files:
        doc = yaml.safe_load(f.read_text())
        nodes = [k for k in doc if k != "/**"]
        assert nodes, f.name
        for node in nodes:
            assert node in by_node, f"{f.name}: section {node!r} is no robotrl node"
            cfg = by_node[node].from_yaml(f, node)
            for key, value in doc[node]["ros__parameters"].items():
                got = getattr(cfg, key)
                assert (list(got) if isinstance(got, tuple) else got) == value, (f.name, key)
            assert cfg.profile == doc.get("/**", {}).get("ros__parameters", {}).get(
                "profile", cfg.profile
            )


def test_hil_actor_overrides_exist_in_train_rl_config() -> None:
    cfg = OmegaConf.to_container(OmegaConf.load(ROOT / "robotrl" / "conf" / "train_rl.yaml"))

    def has(key: str) -> bool:
        node: Any = cfg
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    from robotrl.cli import COMMANDS

    path = LAUNCH / "hil_rl_actor.launch.py"
    roles = []
    for _, cmd in _processes(path, _all_on(path)):
        if cmd[0] != "robotrl":
            continue
        assert cmd[1] in COMMANDS
        for item in cmd[2:]:
            key, sep, value = item.partition("=")
            assert sep and has(key), item
            if key == "role":
                roles.append(value)
    assert sorted(roles) == ["actor", "learner"]


def test_hil_actor_steps_the_ros2_robot_env_of_its_parameter_file() -> None:
    """The actor runs ``backend=ros2``; its ``ros2.*`` overrides compose into train-rl's config
    and load into the robot env's config (profile from the launch argument)."""
    from robotrl.cli import compose
    from robotrl.policy_env import with_backend

    path = LAUNCH / "hil_rl_actor.launch.py"
    for profile in ("franka", "sim"):
        started = dict(_processes(path, {"profile": profile, "use_sim": "true"}))
        actor = started["robotrl_actor"]
        assert "backend=ros2" in actor and "robotrl_sim_robot" in started
        cfg = compose("train_rl", actor[2:])
        assert cfg.backend == "ros2" and cfg.role == "actor"
        kw = with_backend({"controller": "native"}, cfg.backend, dict(cfg.ros2))
        assert kw["backend"] == "ros2" and kw["profile"] == profile
        assert Path(kw["params_file"]).is_file()
        env_cfg = load_config(kw["params_file"], kw["profile"])
        assert env_cfg.profile == profile and env_cfg.control_hz == 20.0
        assert env_cfg.state_timeout_s == 0.05 and not env_cfg.lockstep
        assert env_cfg.topic_profile().equilibrium_pose  # commands go to the robot


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_argument_is_documented_with_its_default(path: Path) -> None:
    readme = (LAUNCH / "README.md").read_text()
    sections = re.split(r"^## ", readme, flags=re.M)
    section = next((s for s in sections if s.startswith(path.name)), None)
    assert section is not None, f"launch/README.md has no '## {path.name}' section"
    rows = {
        m.group(1): m.group(2).strip()
        for m in re.finditer(r"^\| `([^`]+)` \| ([^|]*) \|", section, flags=re.M)
    }
    ld = _generate(path)
    declared = [e for e in ld.entities if isinstance(e, DeclareLaunchArgument)]
    assert declared
    for a in declared:
        assert a.description, f"{path.name}: {a.name} has no description"
        assert a.name in rows, f"launch/README.md ({path.name}) does not document {a.name}"
        doc_default = rows[a.name]
        if a.default_value is None:
            assert doc_default == "(required)", a.name
        elif a.default_value == "":
            assert doc_default == "(empty)", a.name
        elif a.default_value.startswith(str(LAUNCH)):
            rel = "launch/" + str(Path(a.default_value).relative_to(LAUNCH))
            assert doc_default == f"`{rel}`", a.name
        else:
            assert doc_default == f"`{a.default_value}`", a.name
    assert set(rows) == {a.name for a in declared}, "README documents arguments that don't exist"


def test_teleop_cuts_episodes_only_without_the_sim_robot() -> None:
    path = LAUNCH / "collect_teleop.launch.py"
    for use_sim, expected in (("false", True), ("true", False)):
        started = dict(_processes(path, {"use_sim": use_sim}))
        cfg, _ = TeleopNodeConfig.from_args(started["robotrl_teleop"][1:])
        assert cfg.publish_episodes is expected
        assert ("robotrl_sim_robot" in started) is (use_sim == "true")


def test_collect_session_ends_when_the_recorder_has_its_episodes() -> None:
    """Only the recorder counts episodes (it discards one that began before it was up), so the
    teleop node runs unbounded and the launch shuts down when the recorder exits."""
    path = LAUNCH / "collect_teleop.launch.py"
    ld = _generate(path)
    started = dict(_processes(path, {"use_sim": "true", "episodes": "3"}))
    teleop, _ = TeleopNodeConfig.from_args(started["robotrl_teleop"][1:])
    recorder, _ = RecorderConfig.from_args(started["robotrl_recorder"][1:])
    assert teleop.episodes == 0 and recorder.episodes == 3
    # in sim the recorder also records the objects' state, on a robot it does not
    assert recorder.task_state
    real = dict(_processes(path, {"episodes": "3"}))
    assert not RecorderConfig.from_args(real["robotrl_recorder"][1:])[0].task_state
    handlers = [e.args[0] for e in ld.entities if isinstance(e, RegisterEventHandler)]
    (on_exit,) = [h for h in handlers if isinstance(h, OnProcessExit)]
    assert on_exit.kwargs["target_action"].kwargs["name"] == "robotrl_recorder"
    (emit,) = on_exit.kwargs["on_exit"]
    assert isinstance(emit, EmitEvent) and isinstance(emit.kwargs["event"], Shutdown)


def test_unknown_parameter_is_rejected_listing_valid_keys(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("robotrl_teleop:\n  ros__parameters:\n    rate_hz: 20\n    rate: 5\n")
    with pytest.raises(ConfigError, match=r"unknown parameters \['rate'\].*valid: \[.*'rate_hz'"):
        TeleopNodeConfig.from_yaml(f)
    cmd = _processes(LAUNCH / "collect_teleop.launch.py", {"control_hz": "fast"})
    teleop = next(c for n, c in cmd if n == "robotrl_teleop")
    with pytest.raises(ConfigError, match="rate_hz must be float"):
        TeleopNodeConfig.from_args(teleop[1:])


@pytest.mark.ros2
@pytest.mark.slow
def test_collect_teleop_launch_runs_on_the_sim_robot(tmp_path: Path) -> None:
    """What ``ros2 launch launch/collect_teleop.launch.py use_sim:=true device:=expert`` starts,
    run as processes over DDS on loopback: the sim robot in real time, the bridge, the expert
    teleop (auto reset) and the recorder record the episodes asked for."""
    import json
    import os
    import random
    import subprocess
    import sys

    pytest.importorskip("cyclonedds", reason="cyclonedds is in the 'ros2' extra")
    from hardware.ros2.transport import loopback_config
    from robotrl.datasets import EpisodeStore

    out = tmp_path / "collect.zarr"
    args = {
        "use_sim": "true",
        "device": "expert",
        "task": "reach",
        "episodes": "2",
        "out": str(out),
        "profile": "sim",
    }
    started = dict(_processes(LAUNCH / "collect_teleop.launch.py", args))
    assert set(started) == {
        "robotrl_sim_robot",
        "robotrl_bridge",
        "robotrl_teleop",
        "robotrl_recorder",
    }
    env = {**os.environ, "ROS_DOMAIN_ID": str(random.randint(1, 230))}
    env.setdefault("CYCLONEDDS_URI", loopback_config())
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    procs = {
        name: subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for name, cmd in started.items()
    }
    try:
        rec_out, rec_err = procs["robotrl_recorder"].communicate(timeout=120)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        for p in procs.values():
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    stats = json.loads(rec_out.strip().splitlines()[-1])
    assert stats["recorded"] == 2, (stats, rec_err[-2000:])
    store = EpisodeStore.open(out)
    assert store.num_episodes == 2 and store.meta("success").all()
    assert store.meta("task").tolist() == ["reach", "reach"] and store.get("intervention").all()
