"""Safety reflex: the exported risk critic evaluated in the control loop (numpy only, no torch).

Every reflex tick (100-500 Hz, well above the 10-20 Hz policy) :meth:`Reflex.tick` evaluates
``Q_risk(s, a)`` (:mod:`robotrl.algos.safety_critic`, exported as ``.npz``) for the commanded
action and a few recovery candidates in one batched pass. If the commanded action's risk
exceeds the threshold eps_safe, the reflex substitutes a recovery action (the brake, or the
candidate of lowest risk) and, when the wrist already measures contact, asks for lowered
stiffness (variable impedance). Between a lower threshold eps_soft and eps_safe it slows
instead: the command's speed is capped (or its motion scaled) by a limit that falls linearly
with the risk (1 at eps_soft, ``slow_min`` at eps_safe); in contact the stiffness is lowered
(``soften="always"``: also in free space). The deterministic safety filter still applies to
whatever the reflex outputs. Candidates (rows of the batch):

    0  the commanded action a           (its risk decides whether to intervene)
    1  brake: a target behind the TCP's motion, ``-v * brake_time`` (hold when at rest): a hold
       at the current pose only pulls back once the arm has coasted past it
    2  back off along the measured external force (the direction that relieves it)
    3  move up (+z, base frame)
    4  a slowed to ``slow_fraction``

Per tick nothing is allocated: the batch, the hidden layers and the outputs are work arrays
made once. Interventions are counted in ``counts`` (``interventions``: recoveries above
eps_safe, ``slows``: slowed commands) and the last decision is in :attr:`Reflex.level`.

Shapes: O features, A = 7 actions (delta TCP pose + gripper in [-1, 1], base frame), H hidden.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

THRESHOLD = 0.3  # eps_safe when the export carries none
STIFFNESS_SCALE = 0.25  # stiffness multiplier while the reflex holds the arm
SLOW_FRACTION = 0.3
# [s]: the brake target lies where the TCP was this long ago; short, so that braking a peg that
# moves up out of a hole does not pull it back into the chamfer (docs/results.md, safety reflex)
BRAKE_TIME = 0.02
ACTION_SCALE = 0.02  # [m] per action unit (the env's max_dpos)
NUM_CANDIDATES = 5
RECOVERIES = ("min_risk", "hold", "yield")
SOFTEN = ("contact", "always")
SLOWING = ("cap", "scale")
SLOW_MIN = 0.25  # speed limit at eps_safe in the slowing zone (action units)
PASS, SLOW, RECOVER = 0, 1, 2  # Reflex.level: command executed, command slowed, recovery
FORCE_DEADBAND = 1.0  # [N]: below it there is no force direction to back off along
# [N]: stiffness is lowered only in contact. In free space a soft hold would also lower the
# damping (D = 2 sqrt(K m)) and let a fast arm coast further into what it was about to hit.
CONTACT_FORCE = 5.0


class ReflexError(ValueError):
    """An exported critic that does not fit the runtime (shape or version mismatch)."""


class RiskMLP:
    """max(Q1, Q2) of two sigmoid MLPs from numpy weights, for a fixed batch of M rows.

    Args:
        weights: the mapping :meth:`robotrl.algos.safety_critic.SafetyCritic.weights` returns
            (or an ``.npz`` of it): ``mean``/``std`` (O,), ``q{1,2}.w{i}`` (in, out),
            ``q{1,2}.b{i}`` (out,).
        batch: M, rows per evaluation.
    """

    def __init__(self, weights: Mapping[str, np.ndarray], batch: int = NUM_CANDIDATES) -> None:
        n_layers = sum(1 for k in weights if k.startswith("q1.w"))
        if n_layers < 1 or any(f"q2.w{i}" not in weights for i in range(n_layers)):
            raise ReflexError(f"expected q1.w0.. and q2.w0.. weights, got keys {sorted(weights)}")
        self.mean = np.array(weights["mean"], dtype=float)
        self.std = np.array(weights["std"], dtype=float)
        self.obs_dim = self.mean.shape[0]
        self.act_dim = int(weights["act_dim"])
        self.feature_names = [str(x) for x in np.asarray(weights.get("feature_names", []))]
        self.threshold = float(weights.get("threshold", THRESHOLD))
        soft = float(weights.get("soft_threshold", 0.0))
        self.soft_threshold = soft if 0.0 < soft < self.threshold else None  # 0: no soft zone
        self.slow_min = float(weights.get("slow_min", SLOW_MIN))
        self.w = [[np.array(weights[f"{h}.w{i}"], dtype=float) for i in range(n_layers)]
                  for h in ("q1", "q2")]  # fmt: skip
        self.b = [[np.array(weights[f"{h}.b{i}"], dtype=float) for i in range(n_layers)]
                  for h in ("q1", "q2")]  # fmt: skip
        if self.w[0][0].shape[0] != self.obs_dim + self.act_dim:
            raise ReflexError(
                f"first layer expects {self.w[0][0].shape[0]} inputs, "
                f"features + actions give {self.obs_dim} + {self.act_dim}"
            )
        if self.w[0][-1].shape[1] != 1:
            raise ReflexError(f"last layer must have 1 output, got {self.w[0][-1].shape}")
        self.batch = int(batch)
        self._inv_std = 1.0 / self.std
        self.x = np.zeros((batch, self.obs_dim + self.act_dim))
        self._hidden = [np.zeros((batch, w.shape[1])) for w in self.w[0][:-1]]
        self._zeros = [np.zeros_like(h) for h in self._hidden]
        # biases tiled to the batch: a broadcasting add would allocate an iterator buffer
        self._b_tiled = [[np.tile(b, (batch, 1)) for b in bs[:-1]] for bs in self.b]
        self._q = np.zeros((2, batch))
        self._tmp = np.zeros(self.obs_dim)
        # views made once: slicing in the loop would create array objects every tick
        self._x_feat = self.x[:, : self.obs_dim]
        self._x_act = self.x[:, self.obs_dim :]
        self._q_rows = [self._q[0], self._q[1]]
        self._w_out = [np.ascontiguousarray(ws[-1][:, 0]) for ws in self.w]  # a strided column
        # would make matmul copy it every call
        self._b_out = [float(self.b[h][-1][0]) for h in range(2)]

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], batch: int = NUM_CANDIDATES) -> RiskMLP:
        """Load an exported ``.npz`` (no pickle)."""
        with np.load(Path(path), allow_pickle=False) as z:
            return cls({k: z[k] for k in z.files}, batch)

    def load(self, weights: Mapping[str, np.ndarray]) -> None:
        """Copy new weights of the same shapes in place (online updates)."""
        for h, name in enumerate(("q1", "q2")):
            for i in range(len(self.w[h])):
                np.copyto(self.w[h][i], weights[f"{name}.w{i}"])
                np.copyto(self.b[h][i], weights[f"{name}.b{i}"])
                if i < len(self.w[h]) - 1:
                    self._b_tiled[h][i][...] = self.b[h][i]
            self._b_out[h] = float(self.b[h][-1][0])
            np.copyto(self._w_out[h], self.w[h][-1][:, 0])
        np.copyto(self.mean, weights["mean"])
        np.copyto(self.std, weights["std"])
        np.divide(1.0, self.std, out=self._inv_std)

    def set_features(self, features: np.ndarray) -> None:
        """Standardise features (O,) into every row of the input batch."""
        t = self._tmp
        np.subtract(features, self.mean, out=t)
        np.multiply(t, self._inv_std, out=t)
        self._x_feat[...] = t

    @property
    def actions(self) -> np.ndarray:
        """(M, A) view of the batch's action columns: write candidates here."""
        return self._x_act

    def evaluate(self) -> np.ndarray:
        """(M,) risk in [0, 1] of the current batch (an internal buffer: copy to keep)."""
        q0, q1 = self._q_rows
        for h in range(2):
            inp = self.x
            ws = self.w[h]
            last = len(ws) - 1
            for i in range(last):
                out = self._hidden[i]
                np.dot(inp, ws[i], out=out)
                np.add(out, self._b_tiled[h][i], out=out)
                np.maximum(out, self._zeros[i], out=out)
                inp = out
            qh = self._q_rows[h]
            np.dot(inp, self._w_out[h], out=qh)
            np.add(qh, self._b_out[h], out=qh)
        np.maximum(q0, q1, out=q0)  # pessimistic; sigmoid is monotone
        np.negative(q0, out=q0)
        np.exp(q0, out=q0)
        np.add(q0, 1.0, out=q0)
        np.divide(1.0, q0, out=q0)
        return q0


class Reflex:
    """Decides each reflex tick whether to override the commanded action (module docstring).

    Args:
        critic: the numpy risk critic (batch of NUM_CANDIDATES rows).
        threshold: eps_safe; default the critic's exported threshold.
        stiffness_scale: multiplier of the nominal stiffness requested while intervening.
        slow_fraction: scale of the slowed candidate.
        recovery: ``"hold"`` (always row 1: brake to a stop; the default) or ``"min_risk"``
            (the candidate of lowest risk; the critic, trained on the behaviour's own actions,
            ranks recovery candidates poorly, so the brake is the default).
            ``"yield"``: the brake in free space, backing off along the measured force (row 2)
            in contact (> 5 N), where a brake holds the arm where it presses. The comparison
            of the three is in docs/results.md.
        action_scale: TCP translation per action unit [m] (to turn velocity into a brake).
        brake_time: see the brake candidate [s].
        soft_threshold: eps_soft < eps_safe, start of the slowing zone; default the critic's
            exported one (none: no slowing, the reflex is all-or-nothing).
        slow_min: the slowing limit at eps_safe (1 at eps_soft, linear in the risk between;
            default: the export's, else SLOW_MIN).
        slow_in_contact: slow in contact too (False: the slowing zone acts on free-space
            motion only and contact is left to the recovery above eps_safe; a learnt insertion
            slowed in the chamfer jammed more, README).
        slowing: ``"cap"``: the limit caps the command's largest translation component (action
            units; slower commands pass unchanged: a speed limit near risk) or ``"scale"``:
            the command's motion is multiplied by the limit.
        soften: when the reflex lowers the stiffness: ``"contact"`` (intervening while the
            wrist measures > 5 N) or ``"always"`` (whenever it slows or recovers).
    """

    def __init__(
        self,
        critic: RiskMLP,
        threshold: float | None = None,
        stiffness_scale: float = STIFFNESS_SCALE,
        slow_fraction: float = SLOW_FRACTION,
        recovery: str = "hold",
        action_scale: float = ACTION_SCALE,
        brake_time: float = BRAKE_TIME,
        soft_threshold: float | None = None,
        slow_min: float | None = None,
        soften: str = "contact",
        slowing: str = "cap",
        slow_in_contact: bool = True,
    ) -> None:
        if slowing not in SLOWING:
            raise ReflexError(f"slowing must be one of {SLOWING}, got {slowing!r}")
        self.slow_cap = slowing == "cap"
        if recovery not in RECOVERIES:
            raise ReflexError(f"recovery must be one of {RECOVERIES}, got {recovery!r}")
        if soften not in SOFTEN:
            raise ReflexError(f"soften must be one of {SOFTEN}, got {soften!r}")
        self.soften_always = soften == "always"
        self.recovery = recovery
        if critic.batch != NUM_CANDIDATES:
            raise ReflexError(f"critic batch must be {NUM_CANDIDATES}, got {critic.batch}")
        self.critic = critic
        self.threshold = critic.threshold if threshold is None else float(threshold)
        if not (0.0 < self.threshold < 1.0 and 0.0 < stiffness_scale <= 1.0):
            raise ReflexError(
                "expected 0 < threshold < 1 and 0 < stiffness_scale <= 1, got "
                f"{self.threshold}, {stiffness_scale}"
            )
        self.stiffness_scale = float(stiffness_scale)
        if not (action_scale > 0 and brake_time >= 0):
            raise ReflexError(
                f"expected action_scale > 0, brake_time >= 0, got {action_scale}, {brake_time}"
            )
        self._brake_gain = -float(brake_time) / float(action_scale)
        self.slow_fraction = float(slow_fraction)
        soft = critic.soft_threshold if soft_threshold is None else float(soft_threshold)
        slow_min = critic.slow_min if slow_min is None else float(slow_min)
        if soft is not None and not (0.0 < soft < self.threshold and 0.0 <= slow_min <= 1.0):
            raise ReflexError(
                "expected 0 < soft_threshold < threshold and 0 <= slow_min <= 1, got "
                f"{soft}, {self.threshold}, {slow_min}"
            )
        self.soft_threshold = soft
        self.slow_min = float(slow_min)
        self.slow_in_contact = bool(slow_in_contact)
        self.level = PASS  # last decision: PASS, SLOW or RECOVER
        self.scale = 1.0  # motion scale of the last decision (SLOW: < 1)
        self.action = np.zeros(critic.act_dim)  # the action to execute after the last tick
        self._action_motion = self.action[:6]
        self.risk = 0.0  # risk of the commanded action at the last tick
        self.soften = False  # lower the stiffness (intervening while in contact)
        self.counts = {"ticks": 0, "interventions": 0, "slows": 0}
        cand = critic.actions
        self._rows = [cand[j] for j in range(NUM_CANDIDATES)]
        self._motion = [cand[j, :6] for j in range(NUM_CANDIDATES)]

    def tick(
        self,
        features: np.ndarray,
        action: np.ndarray,
        force: np.ndarray,
        velocity: np.ndarray | None = None,
    ) -> bool:
        """Evaluate the commanded ``action`` (A,) at ``features`` (O,) with the measured
        external force (3,) [N] and TCP linear velocity (3,) [m/s] (base frame; None: at rest).
        Returns whether to recover (risk above eps_safe); :attr:`action` holds the action to
        execute (the command itself when :attr:`level` is PASS, the command's motion scaled by
        :attr:`scale` when SLOW) and :attr:`soften` whether to lower the stiffness."""
        c = self.critic
        c.set_features(features)
        rows, motion = self._rows, self._motion
        c.actions[...] = action  # every row starts as the command (keeps its gripper)
        motion[1].fill(0.0)
        if velocity is not None:
            r1, g = rows[1], self._brake_gain
            r1[0], r1[1], r1[2] = (
                min(1.0, max(-1.0, g * float(velocity[0]))),
                min(1.0, max(-1.0, g * float(velocity[1]))),
                min(1.0, max(-1.0, g * float(velocity[2]))),
            )
        motion[2].fill(0.0)
        fx, fy, fz = float(force[0]), float(force[1]), float(force[2])
        f = math.sqrt(fx * fx + fy * fy + fz * fz)
        if f > FORCE_DEADBAND:  # the environment pushes the hand along F: yield to it
            r2 = rows[2]
            r2[0], r2[1], r2[2] = fx / f, fy / f, fz / f
        motion[3].fill(0.0)
        rows[3][2] = 1.0
        np.multiply(motion[4], self.slow_fraction, out=motion[4])
        in_contact = f > CONTACT_FORCE
        risk = c.evaluate()
        self.risk = float(risk[0])
        self.counts["ticks"] += 1
        if not self.risk <= self.threshold:  # NaN risk: recover (fail closed)
            best = 2 if self.recovery == "yield" and in_contact else 1  # yield / brake
            if self.recovery == "min_risk":
                best_risk = float(risk[1])
                for j in range(2, NUM_CANDIDATES):
                    r = float(risk[j])
                    if r < best_risk:
                        best, best_risk = j, r
            np.copyto(self.action, rows[best])
            self.soften = self.soften_always or in_contact
            self.counts["interventions"] += 1
            self.level, self.scale = RECOVER, 0.0
            return True
        np.copyto(self.action, action)
        self.scale = 1.0 if in_contact and not self.slow_in_contact else self._slowing_scale()
        if self.scale < 1.0:
            np.multiply(self._action_motion, self.scale, out=self._action_motion)
            self.soften = self.soften_always or in_contact
            self.counts["slows"] += 1
            self.level = SLOW
        else:
            self.soften = False
            self.level = PASS
        return False

    @property
    def intervening(self) -> bool:
        """The last tick substituted a recovery action (risk above eps_safe)."""
        return self.level == RECOVER

    def _slowing_scale(self) -> float:
        """Motion scale of the command (in :attr:`action`) in the slowing zone; 1 outside it.
        The limit falls linearly from 1 at eps_soft to ``slow_min`` at eps_safe; ``cap`` scales
        only motion faster than the limit (largest translation component, action units)."""
        soft = self.soft_threshold
        if soft is None or not self.risk > soft:
            return 1.0
        limit = 1.0 - (1.0 - self.slow_min) * (self.risk - soft) / (self.threshold - soft)
        if not self.slow_cap:
            return limit
        a = self._action_motion
        n = max(abs(float(a[0])), abs(float(a[1])), abs(float(a[2])))
        return min(1.0, limit / n) if n > 0.0 else 1.0
