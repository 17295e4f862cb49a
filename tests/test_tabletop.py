"""tabletop: the grammar parses every phrasing to its family, the seen/unseen splits partition
the families, the expert succeeds on every family, doing the wrong verb or the wrong cube is no
success, placements keep objects apart and follow the seed, and the eval reports per family."""

import numpy as np
import pytest
from episodes import run_episode

import sim
from robotrl.evaluation import evaluate
from sim.expert import grasp_yaw
from sim.registry import instruction_family
from sim.tasks.lift import CUBE_HALF, LIFT_HEIGHT
from sim.tasks.tabletop import (
    ALL_FAMILIES,
    COLORS,
    MIN_SEPARATION,
    PHRASINGS,
    SEEN_FAMILIES,
    UNSEEN_FAMILIES,
    TabletopExpert,
    instructions_of,
)
from sim.tasks.tabletop import instruction_family as family_of


def test_grammar_parses_every_phrasing():
    for verb, phrasings in PHRASINGS.items():
        for p in phrasings:
            for c in COLORS:
                assert family_of(p.format(c=c)) == f"{verb}/{c}"
                assert family_of(p.format(c=c).upper() + ".") == f"{verb}/{c}"
    for bad in ("lift the cube", "lift the purple cube", "put the red cube in the bin"):
        with pytest.raises(ValueError, match="grammar"):
            family_of(bad)
    assert len(instructions_of(ALL_FAMILIES)) == len(ALL_FAMILIES) * 4
    with pytest.raises(ValueError, match="unknown families"):
        instructions_of(("push/red",))


def test_splits_partition_the_families_and_cover_every_word():
    assert set(SEEN_FAMILIES) | set(UNSEEN_FAMILIES) == set(ALL_FAMILIES)
    assert not set(SEEN_FAMILIES) & set(UNSEEN_FAMILIES)
    seen_verbs = {f.split("/")[0] for f in SEEN_FAMILIES}
    seen_colors = {f.split("/")[1] for f in SEEN_FAMILIES}
    assert seen_verbs == set(PHRASINGS) and seen_colors == set(COLORS)
    env = sim.make("tabletop_unseen")
    drawn = set()
    for seed in range(12):
        env.reset(seed=seed)
        drawn.add(env.task.family)
    assert drawn == set(UNSEEN_FAMILIES)


def test_expert_succeeds_on_every_family():
    env = sim.make("tabletop")
    expert = sim.make_expert("tabletop", env)
    results: dict[str, list[bool]] = {}
    for seed in range(36):
        obs, info = run_episode(env, expert, seed)
        results.setdefault(env.task.family, []).append(bool(info["success"]))
        verb, color = env.task.family.split("/")
        if info["success"] and verb == "lift":
            assert obs[f"state/{color}_pos"][2] > CUBE_HALF + LIFT_HEIGHT
        if info["success"] and verb == "place":
            assert np.linalg.norm(obs[f"state/{color}_pos"][:2] - obs["state/pad_pos"][:2]) < 0.04
        np.testing.assert_array_equal(obs["state/target_pos"], obs[f"state/{color}_pos"])
        yaw = 4 * grasp_yaw(obs[f"state/{color}_quat"])  # the named cube's, mod 90 deg
        np.testing.assert_allclose(obs["state/target_yaw"], [np.cos(yaw), np.sin(yaw)], atol=1e-6)
    assert set(results) == set(ALL_FAMILIES)
    for family, oks in results.items():
        assert all(oks), (family, oks)


@pytest.mark.parametrize("wrong", ["verb", "cube"])
def test_the_wrong_verb_or_cube_is_no_success(wrong):
    env = sim.make("tabletop")

    class Wrong(TabletopExpert):
        def __call__(self, obs):
            verb, color = family_of(str(obs["language"])).split("/")
            if wrong == "verb":
                verb = "place" if verb == "lift" else "lift"
            else:
                color = next(c for c in COLORS if c != color)
            text = PHRASINGS[verb][0].format(c=color)
            return super().__call__({**obs, "language": text})

    res = evaluate(env, Wrong(), 8, seed=500, progress=False)
    assert res.success_rate == 0.0


def test_placement_follows_the_seed_and_keeps_objects_apart():
    env = sim.make("tabletop")
    for seed in range(10):
        obs, info = env.reset(seed=seed)
        assert obs["language"] == info["language"] == env.instruction
        xy = [obs[f"state/{c}_pos"][:2] for c in COLORS] + [obs["state/pad_pos"][:2]]
        gaps = [np.linalg.norm(a - b) for i, a in enumerate(xy) for b in xy[i + 1 :]]
        assert min(gaps) >= MIN_SEPARATION - 1e-6
        again, _ = env.reset(seed=seed)
        assert again["language"] == obs["language"]
        np.testing.assert_array_equal(again["state/pad_pos"], obs["state/pad_pos"])


def test_the_table_camera_sees_the_scene():
    env = sim.make("tabletop", cameras=("table", "wrist"), image_size=(64, 64))
    obs, _ = env.reset(seed=0)
    img = obs["images/table"].astype(int)
    assert img.shape == (64, 64, 3)
    # each cube and the pad show as pixels of their colour
    assert ((img[..., 0] > 150) & (img[..., 1] < 80)).sum() >= 4  # red
    assert ((img[..., 2] > 150) & (img[..., 0] < 80)).sum() >= 4  # blue
    assert ((img[..., 0] > 180) & (img[..., 1] > 160) & (img[..., 2] < 100)).sum() >= 8  # pad


def test_eval_reports_success_per_family():
    env = sim.make("tabletop")
    res = evaluate(env, sim.make_expert("tabletop", env), 12, seed=700, progress=False)
    groups = res.by_group(lambda text: instruction_family("tabletop", text))
    assert set(groups) <= set(ALL_FAMILIES)
    assert sum(g["episodes"] for g in groups.values()) == 12
    assert all(g["success_rate"] == 1.0 for g in groups.values())
    assert instruction_family("lift", "anything") == ""
