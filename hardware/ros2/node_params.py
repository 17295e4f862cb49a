"""Typed node parameters: the base of every node's configuration dataclass.

A :class:`NodeConfig` subclass is loaded from ROS 2 parameters: a parameter file in the ROS 2
layout (``<node_name>: ros__parameters: {...}``, ``/**`` for every node; :meth:`from_yaml`) or a
ROS 2 node command line (``--ros-args --params-file F -p key:=value -r __node:=name``;
:meth:`from_args`). Unknown keys are errors listing the valid ones; values are checked against
the field types (ints widen to floats, lists become tuples). Nested ``topics: {name: topic}``
overrides entries of the chosen topic profile (``hardware/ros2/topics.py``).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from hardware.ros2.topics import ConfigError, TopicProfile, topic_profile


def _check_value(name: str, value: Any, hint: Any) -> Any:
    """``value`` converted to the field's type ``hint`` (ints widen to floats, lists to tuples),
    or ConfigError saying what was expected."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check_value(name, value, inner[0])
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(float(value)):
                raise ConfigError(f"{name} must be finite, got {value}")
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif origin is tuple:
        if isinstance(value, list | tuple):
            item = args[0] if args else Any
            return tuple(_check_value(f"{name}[{i}]", v, item) for i, v in enumerate(value))
    elif origin is dict or hint is dict:
        if isinstance(value, dict):
            return dict(value)
    elif hint is Any:
        return value
    expected = getattr(hint, "__name__", str(hint))
    raise ConfigError(f"{name} must be {expected}, got {value!r} ({type(value).__name__})")


@dataclass
class NodeConfig:
    """Fields every node has.

    Attributes:
        profile: topic profile (:data:`PROFILES`).
        topics: overrides of profile entries (field -> topic).
        domain_id: DDS domain; -1 takes ``ROS_DOMAIN_ID`` (default 0).
    """

    NODE_NAME: ClassVar[str] = "node"

    profile: str = "franka"
    topics: dict[str, Any] = field(default_factory=dict)
    domain_id: int = -1

    def __post_init__(self) -> None:
        self.topic_profile()  # validates profile and overrides early
        self.validate()

    def validate(self) -> None:
        """Per-node checks of values (ConfigError)."""

    def topic_profile(self) -> TopicProfile:
        """The topics this node uses."""
        return topic_profile(self.profile, self.topics)

    @classmethod
    def field_names(cls) -> list[str]:
        return sorted(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_params(cls, params: dict[str, Any], where: str = "parameters") -> Self:
        """Build from a ``ros__parameters`` mapping; unknown keys and bad types -> ConfigError."""
        valid = cls.field_names()
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise ConfigError(
                f"{where}: unknown parameters {unknown} for {cls.__name__}; valid: {valid}"
            )
        hints = typing.get_type_hints(cls)
        kwargs = {k: _check_value(f"{where}: {k}", v, hints[k]) for k, v in params.items()}
        return cls(**kwargs)

    @classmethod
    def from_yaml(cls, path: str | Path, node_name: str | None = None) -> Self:
        """The ``node_name`` section (default :attr:`NODE_NAME`) of a ROS 2 parameter file,
        merged over its ``/**`` section; a file without either section -> ConfigError."""
        node_name = node_name or cls.NODE_NAME
        return cls.from_params(cls.yaml_params(path, node_name), where=f"{path} [{node_name}]")

    @classmethod
    def yaml_params(cls, path: str | Path, node_name: str | None = None) -> dict[str, Any]:
        """The raw ``ros__parameters`` of ``node_name`` in ``path`` merged over ``/**``."""
        import yaml

        node_name = node_name or cls.NODE_NAME
        doc = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: expected a mapping of node names, got {type(doc).__name__}")
        params: dict[str, Any] = {}
        found = False
        for key in ("/**", node_name, "/" + node_name.lstrip("/")):
            if key in doc:
                section = doc[key]
                if not isinstance(section, dict) or set(section) != {"ros__parameters"}:
                    raise ConfigError(
                        f"{path}: section {key!r} must hold exactly 'ros__parameters', "
                        f"got {sorted(section) if isinstance(section, dict) else section!r}"
                    )
                params.update(section["ros__parameters"] or {})
                found = True
        if not found:
            raise ConfigError(
                f"{path}: no section for node {node_name!r} (sections: {sorted(doc)})"
            )
        return params

    @classmethod
    def from_args(cls, argv: Sequence[str]) -> tuple[Self, str]:
        """Config and node name from a ROS 2 node command line.

        Accepted: ``key:=value`` / ``key=value`` before ``--ros-args``; after it
        ``--params-file F`` (repeatable, later files win), ``-p key:=value`` / ``--param``,
        ``-r __node:=name`` / ``--remap``, and ``--log-level X`` (ignored). Values are YAML
        (as in ROS); ``topics.ee_pose:=/x`` sets one nested entry. Unknown options ->
        ConfigError.
        """
        import yaml

        node_name = cls.NODE_NAME
        files: list[str] = []
        sets: list[str] = []
        args = list(argv)
        i, ros = 0, False
        while i < len(args):
            a = args[i]
            if a == "--ros-args":
                ros = True
            elif a == "--":
                ros = False
            elif ros and a == "--params-file" and i + 1 < len(args):
                files.append(args[i + 1])
                i += 1
            elif ros and a in ("-p", "--param") and i + 1 < len(args):
                sets.append(args[i + 1])
                i += 1
            elif ros and a in ("-r", "--remap") and i + 1 < len(args):
                lhs, _, rhs = args[i + 1].partition(":=")
                if lhs != "__node" or not rhs:
                    raise ConfigError(
                        f"only '-r __node:=<name>' remaps are supported, got {args[i + 1]!r}"
                    )
                node_name = rhs
                i += 1
            elif ros and a == "--log-level" and i + 1 < len(args):
                i += 1
            elif not ros and ("=" in a) and not a.startswith("-"):
                sets.append(a)
            else:
                raise ConfigError(
                    f"unexpected argument {a!r}; expected key:=value or --ros-args "
                    "[--params-file F] [-p key:=value] [-r __node:=name]"
                )
            i += 1
        params: dict[str, Any] = {}
        for f in files:
            for k, v in cls.yaml_params(f, node_name).items():
                if isinstance(v, dict) and isinstance(params.get(k), dict):
                    params[k] = {**params[k], **v}
                else:
                    params[k] = v
        for item in sets:
            key, sep, raw = item.partition(":=")
            if not sep:
                key, sep, raw = item.partition("=")
            value = yaml.safe_load(raw) if raw != "" else ""
            if "." in key:
                outer, inner = key.split(".", 1)
                params[outer] = {**(params.get(outer) or {}), inner: value}
            else:
                params[key] = value
        return cls.from_params(params, where=f"{cls.__name__} ({node_name})"), node_name

    def to_params(self) -> dict[str, Any]:
        """The ``ros__parameters`` mapping of this config (tuples as lists)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out
