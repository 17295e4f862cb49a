"""``tabletop``: the language-conditioned suite. Three cubes (red, green, blue) and a flat pad lie
at random places; an instruction names a verb and a cube:

- ``lift``: lift the named cube 10 cm;
- ``place``: put the named cube down on the pad (its centre within :data:`PAD_TOLERANCE` of the
  pad's centre, resting on the table).

The other two cubes are distractors. Instructions come from a template grammar with four
phrasings per verb, so a policy must read the words, not match whole strings. A *family* is a
``"verb/colour"`` pair (six in all). ``tabletop_seen`` draws four of them and ``tabletop_unseen``
the two others (``lift/blue``, ``place/green``): every verb and every colour is seen in
training, two combinations of them are not.

Privileged observations (``state/*``, for auxiliary losses and oracles): every cube's pose, the
pad's position, the named cube's position ``target_pos`` and face yaw ``target_yaw`` (cos 4y,
sin 4y: what a symmetric cube's look can tell). Frames and units: world frame, metres; the pad
is a visual disc (no collision).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import mujoco
import numpy as np

from sim.expert import grasp_yaw, yaw_down
from sim.instructed_env import LANGUAGE_KEY, InstructedTask
from sim.task import free_joint_qpos_adr, yaw_quat
from sim.tasks.lift import CUBE_HALF, LIFT_HEIGHT, LiftExpert, colored_cubes_xml

COLORS = {"red": "0.85 0.15 0.1 1", "green": "0.1 0.7 0.2 1", "blue": "0.15 0.3 0.9 1"}
PAD_RGBA = "0.95 0.85 0.2 1"
PAD_RADIUS = 0.05  # [m]
PAD_TOLERANCE = 0.035  # success: cube centre this close to the pad centre in xy [m]
RESTING = CUBE_HALF + 0.006  # success (place): cube centre below this height [m]
AREA_CENTER = np.array([0.5, 0.0])  # xy of the area objects are placed in [m]
AREA_HALF = np.array([0.11, 0.19])  # its half extents [m]
MIN_SEPARATION = 0.11  # object centres at least this far apart [m]

PHRASINGS: dict[str, tuple[str, ...]] = {
    "lift": (
        "lift the {c} cube",
        "pick up the {c} cube",
        "raise the {c} block",
        "grab the {c} block and lift it",
    ),
    "place": (
        "put the {c} cube on the pad",
        "place the {c} block on the pad",
        "move the {c} cube onto the pad",
        "set the {c} block down on the pad",
    ),
}
VERBS = tuple(PHRASINGS)
ALL_FAMILIES = tuple(f"{v}/{c}" for v in VERBS for c in COLORS)
UNSEEN_FAMILIES = ("lift/blue", "place/green")
SEEN_FAMILIES = tuple(f for f in ALL_FAMILIES if f not in UNSEEN_FAMILIES)
_PARSE = {p.format(c=c): f"{v}/{c}" for v, ps in PHRASINGS.items() for p in ps for c in COLORS}


def instruction_family(instruction: str) -> str:
    """``"verb/colour"`` of an instruction of the grammar (ValueError for any other text)."""
    key = " ".join(instruction.lower().replace(".", " ").split())
    if key not in _PARSE:
        raise ValueError(f"instruction {instruction!r} is not in the tabletop grammar")
    return _PARSE[key]


def instructions_of(families: tuple[str, ...]) -> tuple[str, ...]:
    """Every phrasing of every family in ``families``, in grammar order."""
    unknown = sorted(set(families) - set(ALL_FAMILIES))
    if unknown:
        raise ValueError(f"unknown families {unknown}; known: {list(ALL_FAMILIES)}")
    return tuple(i for i, f in _PARSE.items() if f in families)


@dataclass
class TabletopTask(InstructedTask):
    """Attributes: families: the ``"verb/colour"`` pairs drawn at reset (uniformly, then one of
    the family's phrasings uniformly)."""

    name: str = "tabletop"
    max_episode_steps: int = 120
    object_bodies: tuple[str, ...] = tuple(COLORS)
    families: tuple[str, ...] = ALL_FAMILIES
    instructions: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        self.instructions = instructions_of(self.families)

    def objects_xml(self) -> str:
        cubes = colored_cubes_xml(COLORS)
        pad = f"""
<body name="pad" mocap="true" pos="0.5 -0.1 0.0005">
  <geom name="pad" type="cylinder" size="{PAD_RADIUS} 0.0005" rgba="{PAD_RGBA}"
        contype="0" conaffinity="0"/>
</body>"""
        # A camera over the table (the arm's "front" camera sees the cubes a few pixels wide).
        table_cam = """
<camera name="table" pos="0.85 0 0.5" xyaxes="0 1 0 -0.819 0 0.573" fovy="55"/>"""
        return cubes + pad + table_cam

    def bind(self, model: mujoco.MjModel) -> None:
        self._qadr = {c: free_joint_qpos_adr(model, c) for c in COLORS}
        self._body = {c: model.body(c).id for c in COLORS}
        self._pad_mocap = int(model.body("pad").mocapid[0])
        self.pad_pos = np.array([0.5, -0.1, 0.0])
        self.instruction = self.instructions[0]

    def family_of(self, instruction: str) -> str:
        """``"verb/colour"`` of an instruction of the grammar."""
        return instruction_family(instruction)

    @property
    def family(self) -> str:
        """``"verb/colour"`` of the current instruction."""
        return _PARSE[self.instruction]

    @property
    def verb(self) -> str:
        return self.family.split("/")[0]

    @property
    def target(self) -> str:
        """Colour of the cube the current instruction names."""
        return self.family.split("/")[1]

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        family = self.families[int(rng.integers(len(self.families)))]
        phrasings = [i for i in self.instructions if _PARSE[i] == family]
        self.instruction = phrasings[int(rng.integers(len(phrasings)))]
        half = AREA_HALF * (self.randomization.object_pos / 0.1)
        placed: list[np.ndarray] = []
        while len(placed) < len(COLORS) + 1:  # cubes, then the pad; rejection sampling
            xy = AREA_CENTER + rng.uniform(-1, 1, 2) * half
            if all(np.linalg.norm(xy - p) >= MIN_SEPARATION for p in placed):
                placed.append(xy)
        for c, p in zip(COLORS, placed, strict=False):
            q = self._qadr[c]
            data.qpos[q : q + 3] = (*p, CUBE_HALF)
            data.qpos[q + 3 : q + 7] = yaw_quat(rng.uniform(-1, 1) * self.randomization.object_yaw)
        self.pad_pos = np.array([*placed[-1], 0.0])
        data.mocap_pos[self._pad_mocap] = (*placed[-1], 0.0005)

    def observe(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        # the named cube's face yaw as (cos 4y, sin 4y): a cube looks the same every 90 deg,
        # so this is what images can tell (a quaternion is not, up to those symmetries)
        yaw = 4.0 * grasp_yaw(data.xquat[self._body[self.target]])
        out = {
            "state/pad_pos": self.pad_pos.copy(),
            "state/target_pos": data.xpos[self._body[self.target]],  # the named cube
            "state/target_yaw": np.array([np.cos(yaw), np.sin(yaw)]),
        }
        for c, b in self._body.items():
            out[f"state/{c}_pos"] = data.xpos[b]
            out[f"state/{c}_quat"] = data.xquat[b]
        return out

    def observation_sizes(self) -> dict[str, int]:
        sizes = {n: s for c in COLORS for n, s in ((f"{c}_pos", 3), (f"{c}_quat", 4))}
        return {**sizes, "pad_pos": 3, "target_pos": 3, "target_yaw": 2}

    def success(self, data: mujoco.MjData) -> bool:
        cube = data.xpos[self._body[self.target]]
        if self.verb == "lift":
            return bool(cube[2] > CUBE_HALF + LIFT_HEIGHT)
        on_pad = np.linalg.norm(cube[:2] - self.pad_pos[:2]) < PAD_TOLERANCE
        return bool(on_pad and cube[2] < RESTING)

    def dense_reward(self, data: mujoco.MjData, tcp_pos: np.ndarray) -> float:
        cube = data.xpos[self._body[self.target]]
        reach = 1.0 - np.tanh(10.0 * np.linalg.norm(tcp_pos - cube))
        if self.verb == "lift":
            lift = np.clip((cube[2] - CUBE_HALF) / LIFT_HEIGHT, 0.0, 1.0)
            return float(0.3 * reach + 0.7 * lift)
        carry = 1.0 - np.tanh(10.0 * np.linalg.norm(cube[:2] - self.pad_pos[:2]))
        return float(0.3 * reach + 0.7 * carry * (cube[2] > CUBE_HALF + 0.01 or carry > 0.6))


@dataclass
class TabletopSeenTask(TabletopTask):
    """The training families (every verb and colour, not ``UNSEEN_FAMILIES``)."""

    name: str = "tabletop_seen"
    families: tuple[str, ...] = SEEN_FAMILIES


@dataclass
class TabletopUnseenTask(TabletopTask):
    """The held-out verb x colour combinations."""

    name: str = "tabletop_unseen"
    families: tuple[str, ...] = UNSEEN_FAMILIES


class TabletopExpert(LiftExpert):
    """Reads the instruction: grasps the named cube as the lift expert does, then lifts it (lift)
    or carries it above the pad and lowers it onto the pad (place)."""

    CARRY = 0.08  # [m] TCP height above the table while carrying to the pad

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        verb, color = instruction_family(str(obs[LANGUAGE_KEY])).split("/")
        cube = obs[f"state/{color}_pos"].astype(float)
        rot = yaw_down(grasp_yaw(obs[f"state/{color}_quat"]))
        action = self.grasp(obs, cube, rot)
        if action is not None:
            return action
        if verb == "lift":
            goal = np.array([cube[0], cube[1], CUBE_HALF + LIFT_HEIGHT + 0.05])
            return self.move(obs, goal, rot, 1.0)
        ee = obs["state/ee_pos"].astype(float)
        pad = obs["state/pad_pos"].astype(float)
        held = ee + (pad - cube)  # TCP position that puts the cube over the pad
        if self.phase == 3:  # up and over the pad
            goal = np.array([held[0], held[1], self.CARRY])
            if ee[2] < self.CARRY - 0.03:
                goal[:2] = ee[:2]  # clear the other cubes before moving sideways
            if np.linalg.norm(cube[:2] - pad[:2]) < 0.008:
                self.phase = 4
            return self.move(obs, goal, rot, 1.0)
        goal = np.array([held[0], held[1], CUBE_HALF - 0.004])  # lower until it rests
        return self.move(obs, goal, rot, 1.0, speed=0.5)
