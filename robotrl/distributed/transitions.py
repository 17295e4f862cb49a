"""Transitions and weights on the wire: validation, stacking and pickle-free encoding.

A transition is what :meth:`robotrl.datasets.replay_buffer.ReplayBuffer.add` takes
(``obs``, ``action``, ``reward``, ``next_obs``, ``terminated``, ``truncated``, ``env_id``) plus
optional ``extras`` (e.g. ``{"intervention": np.bool_(True)}``). It is flattened to named numpy
arrays:

    obs/<key>, next_obs/<key>, action, reward (float32), terminated (bool), truncated (bool),
    env_id (int64), extra/<key>

A batch stacks T transitions field by field, ``(T, *shape)``, and travels as safetensors bytes:
a JSON header naming dtype, shape and offsets, then the raw little-endian buffers. Decoding never
runs code (no pickle), and only numeric and bool dtypes are accepted. Weights (a learner's state
dict) use the same encoding.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as _st_load
from safetensors.numpy import save as _st_save

OBS, NEXT_OBS, EXTRA = "obs/", "next_obs/", "extra/"
_SCALARS = {
    "reward": np.dtype(np.float32),
    "terminated": np.dtype(bool),
    "truncated": np.dtype(bool),
    "env_id": np.dtype(np.int64),
}
_NUMERIC_KINDS = "biufc"  # bool, signed, unsigned, float, complex: plain bytes, nothing to execute


class SchemaError(ValueError):
    """A transition or batch does not match the fields, shapes or dtypes agreed for the link."""


def _as_array(name: str, value: Any) -> np.ndarray:
    """Contiguous native-byte-order copy of a numpy array or numpy scalar; TypeError otherwise."""
    if not isinstance(value, np.ndarray | np.generic):
        raise TypeError(f"{name} must be a numpy array, got {type(value).__name__}")
    arr = np.array(value, copy=True, order="C")
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(f"{name} must have a numeric or bool dtype, got {arr.dtype}")
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def _as_flag(name: str, value: Any) -> np.ndarray:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return np.array(bool(value))


def flatten_transition(
    obs: Mapping[str, np.ndarray],
    action: np.ndarray,
    reward: float,
    next_obs: Mapping[str, np.ndarray],
    terminated: bool,
    truncated: bool,
    env_id: int = 0,
    extras: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """One transition as ``{flat name: array}`` (copies; checks types, not the schema).

    Raises:
        TypeError: a value is not a numpy array (or the scalar fields not a number / bool), or
            has a non-numeric dtype (object, str, bytes, structured).
        SchemaError: ``obs`` and ``next_obs`` have different keys.
    """
    for name, d in (("obs", obs), ("next_obs", next_obs), ("extras", extras or {})):
        if not isinstance(d, Mapping):
            raise TypeError(f"{name} must be a mapping of numpy arrays, got {type(d).__name__}")
    if set(obs) != set(next_obs):
        raise SchemaError(f"obs and next_obs keys differ: {sorted(obs)} vs {sorted(next_obs)}")
    flat = {OBS + k: _as_array(f"obs[{k!r}]", v) for k, v in obs.items()}
    flat.update({NEXT_OBS + k: _as_array(f"next_obs[{k!r}]", v) for k, v in next_obs.items()})
    flat["action"] = _as_array("action", action)
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real):
        raise TypeError(f"reward must be a real number, got {type(reward).__name__}")
    flat["reward"] = np.array(reward, np.float32)
    flat["terminated"] = _as_flag("terminated", terminated)
    flat["truncated"] = _as_flag("truncated", truncated)
    if isinstance(env_id, bool) or not isinstance(env_id, numbers.Integral) or env_id < 0:
        raise TypeError(f"env_id must be an int >= 0, got {env_id!r}")
    flat["env_id"] = np.array(env_id, np.int64)
    flat.update({EXTRA + k: _as_array(f"extras[{k!r}]", v) for k, v in (extras or {}).items()})
    return flat


@dataclass(frozen=True)
class TransitionSchema:
    """Per-transition ``{flat name: (shape, dtype)}`` that every transition of a link shares."""

    fields: Mapping[str, tuple[tuple[int, ...], np.dtype]]

    @classmethod
    def of(cls, flat: Mapping[str, np.ndarray]) -> TransitionSchema:
        """The schema of one flattened transition."""
        return cls({k: (tuple(v.shape), v.dtype) for k, v in sorted(flat.items())})

    def check(self, flat: Mapping[str, np.ndarray]) -> None:
        """Raise :class:`SchemaError` unless ``flat`` (one transition) fits this schema."""
        self._compare({k: (tuple(v.shape), v.dtype) for k, v in flat.items()}, "transition")

    def check_batch(self, arrays: Mapping[str, np.ndarray]) -> int:
        """Raise :class:`SchemaError` unless ``arrays`` is a batch (T, ...) of this schema; T."""
        lengths = {v.shape[0] if v.ndim else -1 for v in arrays.values()}
        if len(lengths) != 1 or -1 in lengths:
            raise SchemaError(f"batch fields need one leading length T, got {sorted(lengths)}")
        self._compare({k: (tuple(v.shape[1:]), v.dtype) for k, v in arrays.items()}, "batch")
        return lengths.pop()

    def _compare(self, got: Mapping[str, tuple[tuple[int, ...], np.dtype]], what: str) -> None:
        missing, extra = sorted(set(self.fields) - set(got)), sorted(set(got) - set(self.fields))
        if missing or extra:
            raise SchemaError(
                f"{what} fields differ from the schema: missing {missing}, unexpected {extra}"
            )
        for k, (shape, dtype) in self.fields.items():
            if got[k] != (shape, dtype):
                raise SchemaError(
                    f"{what} field {k!r}: expected shape {shape} dtype {dtype}, "
                    f"got shape {got[k][0]} dtype {got[k][1]}"
                )

    def describe(self) -> dict[str, list[Any]]:
        """JSON-friendly ``{name: [shape, dtype str]}``."""
        return {k: [list(s), d.str] for k, (s, d) in self.fields.items()}


def _mapping_view(fields: Mapping[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) :]: v for k, v in fields.items() if k.startswith(prefix)}


@dataclass
class TransitionBatch:
    """T transitions of one actor, stacked: ``fields[name]`` is (T, *shape).

    ``actor_id``/``epoch``/``seq`` say where it came from (set by the learner server).
    """

    fields: dict[str, np.ndarray]
    actor_id: str = ""
    epoch: int = 0
    seq: int = -1
    obs: dict[str, np.ndarray] = field(init=False, repr=False)
    next_obs: dict[str, np.ndarray] = field(init=False, repr=False)
    extras: dict[str, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.obs = _mapping_view(self.fields, OBS)
        self.next_obs = _mapping_view(self.fields, NEXT_OBS)
        self.extras = _mapping_view(self.fields, EXTRA)

    def __len__(self) -> int:
        return int(self.fields["reward"].shape[0])

    @property
    def action(self) -> np.ndarray:
        """(T, Da)."""
        return self.fields["action"]

    @property
    def reward(self) -> np.ndarray:
        """(T,) float32."""
        return self.fields["reward"]

    @property
    def terminated(self) -> np.ndarray:
        """(T,) bool."""
        return self.fields["terminated"]

    @property
    def truncated(self) -> np.ndarray:
        """(T,) bool."""
        return self.fields["truncated"]

    @property
    def env_id(self) -> np.ndarray:
        """(T,) int64, the actor's env stream of each transition."""
        return self.fields["env_id"]

    def rows(self) -> Iterator[dict[str, Any]]:
        """Each transition as keyword arguments of ``ReplayBuffer.add`` (extras left out)."""
        for i in range(len(self)):
            yield {
                "obs": {k: v[i] for k, v in self.obs.items()},
                "action": self.action[i],
                "reward": float(self.reward[i]),
                "next_obs": {k: v[i] for k, v in self.next_obs.items()},
                "terminated": bool(self.terminated[i]),
                "truncated": bool(self.truncated[i]),
                "env_id": int(self.env_id[i]),
            }


def stack(rows: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Flattened transitions of one schema -> ``{name: (T, *shape)}``."""
    if not rows:
        raise ValueError("cannot stack an empty list of transitions")
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def encode_arrays(
    arrays: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None
) -> bytes:
    """safetensors bytes of named numeric arrays (``metadata``: str -> str, kept in the header)."""
    return _st_save(dict(arrays), metadata=dict(metadata) if metadata else None)


def decode_arrays(data: bytes) -> dict[str, np.ndarray]:
    """Inverse of :func:`encode_arrays`; ValueError if ``data`` is not a safetensors buffer."""
    try:
        return _st_load(bytes(data))
    except (SafetensorError, ValueError, TypeError) as e:  # malformed header, short buffer
        raise ValueError(f"not a valid safetensors payload ({len(data)} bytes): {e}") from e


def decode_batch(data: bytes, schema: TransitionSchema | None = None) -> TransitionBatch:
    """A :class:`TransitionBatch` from encoded bytes, checked against ``schema`` if given.

    Raises:
        ValueError: malformed payload. SchemaError: fields/shapes/dtypes do not fit.
    """
    arrays = decode_arrays(data)
    missing = sorted((set(_SCALARS) | {"action"}) - set(arrays))
    if missing:
        raise SchemaError(f"batch lacks the fields {missing}")
    for k, dtype in _SCALARS.items():
        if arrays[k].dtype != dtype or arrays[k].ndim != 1:
            raise SchemaError(
                f"batch field {k!r} must be (T,) {dtype}, got {arrays[k].shape} {arrays[k].dtype}"
            )
    if any(v.ndim == 0 or v.shape[0] == 0 for v in arrays.values()):
        raise SchemaError("every batch field needs a leading length T >= 1")
    (schema or TransitionSchema.of({k: v[0] for k, v in arrays.items()})).check_batch(arrays)
    return TransitionBatch(arrays)


def state_dict_arrays(state_dict: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Numpy copies of a state dict's values (numpy arrays, or tensors via ``.detach().cpu()``)."""
    out = {}
    for k, v in state_dict.items():
        if not isinstance(k, str):
            raise TypeError(f"state dict keys must be str, got {type(k).__name__}")
        if hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor, without importing torch
            v = v.detach().cpu().numpy()
        out[k] = _as_array(f"state_dict[{k!r}]", v)
    return out
