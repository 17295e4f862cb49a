"""What an RL agent reads with ``features=relative``: the state, plus where each object is
relative to the gripper.

A correction that aims the gripper at an object depends on the difference of two positions,
``object - TCP``. From separately standardised inputs a small network has to learn that
difference itself; :class:`RelativeFeaturizer` hands it over, in units of
:data:`RELATIVE_UNIT_M` (as ManiSkill's state observations carry ``tcp_to_obj_pos``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from robotrl.algos.residual import StateFeaturizer

TCP_KEY = "state/ee_pos"  # the gripper's (TCP) position, world frame [m]
ROBOT_KEYS = frozenset({TCP_KEY, "state/joint_pos"})  # ``*_pos`` entries that are not objects
RELATIVE_UNIT_M = 0.05  # one feature unit of a relative position [m]


def object_position_keys(keys: list[str]) -> list[str]:
    """The object positions among state ``keys``: the ``state/<name>_pos`` entries that are not
    the robot's own (:data:`ROBOT_KEYS`)."""
    return [
        k for k in keys if k.startswith("state/") and k.endswith("_pos") and k not in ROBOT_KEYS
    ]


class RelativeFeaturizer:
    """State features (O_s) + each object's position relative to the TCP, world frame, in
    units of 5 cm (3 per object): (..., O_s + 3 K) float32.

    Args:
        state: the standardised state features; its keys must hold ``state/ee_pos`` and at
            least one other ``state/*_pos``, 3 entries each (others of another size are left
            out).

    Raises:
        ValueError: no TCP position or no object position among the state keys.
    """

    def __init__(self, state: StateFeaturizer) -> None:
        self.state = state
        self.objects = [k for k in object_position_keys(state.keys) if state.dims[k] == 3]
        if state.dims.get(TCP_KEY) != 3 or not self.objects:
            raise ValueError(
                f"features=relative needs {TCP_KEY} and an object's state/*_pos (3 entries each) "
                f"among the state keys, got {state.dims}"
            )
        self.keys = list(state.keys)
        self.raw_keys = self.keys

    @property
    def dim(self) -> int:
        return self.state.dim + 3 * len(self.objects)

    def _relative(self, obs: Mapping[str, Any]) -> np.ndarray:
        tcp = np.asarray(obs[TCP_KEY], np.float32)
        rel = [(np.asarray(obs[k], np.float32) - tcp) / RELATIVE_UNIT_M for k in self.objects]
        return np.concatenate(rel, axis=-1)  # float32 already: no copy per step

    def __call__(self, obs: Mapping[str, Any]) -> np.ndarray:
        """(..., O) features of one observation (or a batch with leading dims)."""
        return np.concatenate([self.state(obs), self._relative(obs)], axis=-1)

    def from_window(self, window: Mapping[str, Any]) -> np.ndarray:
        """(B, O) features of the latest step of a policy's (B, To, ...) observation window."""
        return self({k: np.asarray(window[k][:, -1]) for k in self.keys})
