"""train-rl algo=potential: settings it cannot run are one-line errors before anything loads; end
to end on peg_insert it writes the metrics CSV, curve, video and a checkpoint that robotrl eval
runs as a residual on its base; a base that never succeeds is refused in one line.

The end-to-end test improves a noisy scripted expert in place of the tiny base's own actions
(a base cloned in seconds never inserts the peg, so its rollouts hold nothing to learn from);
the checkpoint is still the actor on that base."""

from pathlib import Path

import numpy as np
import pytest
from tiny_reach import evaluate_checkpoint, reach_demos, tiny_checkpoint

import sim
from robotrl.algos.kept_agent import best_evaluation
from robotrl.algos.residual_policy import is_residual_checkpoint, load_residual_policy
from robotrl.cli import compose
from robotrl.commands import potential
from robotrl.commands.collect import run_collect
from robotrl.commands.train_rl import run_train_rl
from robotrl.metrics import read_csv


@pytest.fixture(scope="module")
def peg_base(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("potential")
    store = root / "peg.zarr"
    args = ["task=peg_insert", "device=expert", "episodes=2", f"out={store}", "viewer=off"]
    run_collect(compose("collect", args))
    return tiny_checkpoint(root, store)


def _cfg(tmp_path: Path, ckpt: str, *extra: str):
    return compose(
        "train_rl",
        [
            f"checkpoint={ckpt}",
            "algo=potential",
            "potential.iterations=2",
            "potential.base_episodes=8",
            "potential.episodes_per_iteration=4",
            "potential.potential_steps=20",
            "potential.actor_steps=20",
            "eval_episodes=2",
            "videos=0",
            f"output_dir={tmp_path}",
            "progress=false",
            *extra,
        ],
    )


class NoisyExpert:
    """peg_insert's scripted expert with action noise: it succeeds now and then."""

    def __init__(self, env) -> None:
        self.expert = sim.make_expert("peg_insert", env, noise=0.08, seed=0)

    def reset(self) -> None:
        self.expert.reset()

    def __call__(self, obs):
        return np.asarray(self.expert(obs), np.float32)


@pytest.mark.slow
def test_train_rl_potential_end_to_end_and_eval(tmp_path, peg_base, monkeypatch) -> None:
    made = []
    make = sim.make
    monkeypatch.setattr(
        potential.sim, "make", lambda *a, **k: made.append(make(*a, **k)) or made[-1]
    )
    monkeypatch.setattr(potential, "as_episode_policy", lambda base, te: NoisyExpert(made[0]))
    out = run_train_rl(_cfg(tmp_path, peg_base, "videos=1", "safety=monitor"))
    assert out["algo"] == "potential" and out["task"] == "peg_insert"
    rows = read_csv(out["run_dir"] + "/metrics.csv")
    assert len(rows) == 3 and rows[0]["env_steps"] == 0 and out["iterations"] == 2
    assert out["env_steps"] == rows[-1]["env_steps"] and out["episodes"] == 8 + 4
    best = best_evaluation([r["success_rate"] for r in rows])
    assert out["kept_step"] == rows[best]["env_steps"]
    assert out["train_safety"]["steps"] == out["env_steps"]  # the rollouts', not the evaluations'
    with open(out["plot"], "rb") as f:
        assert f.read(4) == b"\x89PNG"
    assert len(out["videos"]) == 1 and out["videos"][0].endswith(".mp4")
    assert is_residual_checkpoint(out["checkpoint"]) and not is_residual_checkpoint(peg_base)
    policy, meta = load_residual_policy(out["checkpoint"])
    assert meta["task"] == "peg_insert" and policy.agent.act_dim == 7
    ev = evaluate_checkpoint(out["checkpoint"], tmp_path)
    assert ev["episodes"] == 2 and 0.0 <= ev["success_rate"] <= 1.0


@pytest.mark.slow
def test_a_base_that_never_succeeds_is_kept_and_the_run_says_why(tmp_path, peg_base, capsys):
    out = run_train_rl(_cfg(tmp_path, peg_base, "demos=some.zarr", "eval_every=500"))
    err = capsys.readouterr().err
    assert "does not read eval_every=500, demos=some.zarr" in err
    assert out["ended"] == "all 8 rollouts failed: Φ has nothing to tell apart"
    assert out["ended"] in err
    assert out["iterations"] == 0 and out["kept_step"] == 0 and out["env_steps"] > 0
    policy, _ = load_residual_policy(out["checkpoint"])  # the base alone: a still actor
    assert not policy.agent.act(np.zeros((1, 16), np.float32), np.zeros((1, 7), np.float32))[
        1
    ].any()


@pytest.mark.slow
def test_a_task_without_a_peg_is_refused_before_the_run_directory(tmp_path) -> None:
    ckpt = tiny_checkpoint(tmp_path, reach_demos(tmp_path, episodes=2))
    with pytest.raises(ValueError, match="a success potential is peg_insert's"):
        run_train_rl(_cfg(tmp_path / "runs", ckpt))
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["role=learner"], "needs role=single: it runs in one process"),
        (["human=scripted"], "needs human=none"),
        (["num_envs=2"], "needs num_envs=1"),
        (["obs_keys=[state/peg_pos]"], "needs obs_keys=null"),
        (["total_steps=0"], "total_steps=0"),
        (["eval_episodes=0"], "eval_episodes=0"),
        (["potential.bound=0"], "bound > 0"),
        (["potential.noise_std=nan"], "finite"),
    ],
)
def test_settings_it_cannot_run_are_refused_before_loading(tmp_path, extra, match) -> None:
    with pytest.raises(ValueError, match=match):
        run_train_rl(_cfg(tmp_path, "/nonexistent/checkpoint", *extra))
