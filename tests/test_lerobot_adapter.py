"""LeRobotPolicyAdapter: lerobot diffusion / ACT behind our ChunkPolicy interface.

``-m lerobot`` tests need the lerobot venv (``.ci/lerobot_env.sh``); the unmarked test checks
that the module imports without lerobot and fails with a clear message when used there.
Everything is built locally with random init: no hub access (HF_HUB_OFFLINE=1 in conftest).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest
import torch

from policies.lerobot_adapter import LeRobotPolicyAdapter

# deliberately not alphabetical: the concatenation order is state_dims' order
STATE_DIMS = {"state/joint_pos": 7, "state/gripper": 1, "state/cube_pos": 3}
ENV_STATE = ["state/cube_pos"]  # lerobot needs an image or an environment state
DA = 7
SIZE = 32  # camera H = W
B = 3
TINY = {
    "diffusion": {
        "n_obs_steps": 2,
        "horizon": 8,
        "n_action_steps": 4,
        "down_dims": (16, 32),
        "diffusion_step_embed_dim": 16,
        "spatial_softmax_num_keypoints": 8,
        "num_inference_steps": 3,
    },
    "act": {
        "chunk_size": 6,
        "n_action_steps": 4,
        "dim_model": 32,
        "n_heads": 2,
        "dim_feedforward": 64,
        "n_encoder_layers": 1,
        "n_vae_encoder_layers": 1,
        "latent_dim": 8,
    },
}
TA = {"diffusion": 4, "act": 6}  # diffusion: n_action_steps; ACT: chunk_size
TO = {"diffusion": 2, "act": 1}


def _lerobot() -> None:
    pytest.importorskip("lerobot", reason="needs lerobot (run in the venv of .ci/lerobot_env.sh)")


def _adapter(kind: str, images: bool, **kw: Any) -> LeRobotPolicyAdapter:
    _lerobot()
    torch.manual_seed(0)
    cams = {"image_keys": ["images/front"], "image_size": (SIZE, SIZE)} if images else {}
    return LeRobotPolicyAdapter.from_config(
        kind,
        state_dims=STATE_DIMS,
        action_dim=DA,
        env_state_keys=[] if images else ENV_STATE,
        **cams,
        **{**TINY[kind], **kw},
    )


def _obs(to: int, images: bool, seed: int = 0, b: int = B) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    obs = {k: torch.randn(b, to, d, generator=g) for k, d in STATE_DIMS.items()}
    if images:
        obs["images/front"] = torch.randint(0, 256, (b, to, SIZE, SIZE, 3), generator=g).to(
            torch.uint8
        )
    return obs


@pytest.mark.lerobot
@pytest.mark.parametrize("images", [False, True], ids=["state", "camera"])
@pytest.mark.parametrize("kind", ["diffusion", "act"])
def test_chunks_have_the_protocol_shape_and_range(kind: str, images: bool) -> None:
    from robotrl.types import ChunkPolicy

    p = _adapter(kind, images)
    assert isinstance(p, ChunkPolicy)
    assert (p.obs_horizon, p.action_horizon, p.action_dim) == (TO[kind], TA[kind], DA)
    assert p.policy_type == "lerobot" and p.config["state_dims"] == STATE_DIMS
    assert p.config["image_keys"] == (["images/front"] if images else [])
    obs = _obs(TO[kind], images)
    chunk = p.predict_chunk(obs)
    assert chunk.shape == (B, TA[kind], DA) and chunk.dtype == torch.float32
    assert torch.isfinite(chunk).all() and chunk.abs().max() <= 1.0
    if kind == "act":  # deterministic at inference: same obs, same chunk; other obs, other chunk
        assert torch.equal(p.predict_chunk(obs), chunk)
        assert not torch.allclose(p.predict_chunk(_obs(TO[kind], images, seed=1)), chunk)


@pytest.mark.lerobot
@pytest.mark.parametrize("kind", ["diffusion", "act"])
def test_observation_keys_map_exactly(kind: str) -> None:
    p = _adapter(kind, images=True)
    to = TO[kind]
    obs = {
        "state/joint_pos": torch.arange(B * to * 7, dtype=torch.float32).reshape(B, to, 7),
        "state/gripper": torch.full((B, to, 1), -5.0),
        "state/cube_pos": 100 + torch.arange(B * to * 3, dtype=torch.float32).reshape(B, to, 3),
        "images/front": torch.arange(B * to * SIZE * SIZE * 3)
        .remainder(256)
        .to(torch.uint8)
        .reshape(B, to, SIZE, SIZE, 3),
        "state/unused": torch.zeros(B, to, 2),  # extra entries are ignored
    }
    got = p.to_lerobot_batch(obs)
    state = torch.cat([obs["state/joint_pos"], obs["state/gripper"], obs["state/cube_pos"]], -1)
    image = obs["images/front"].permute(0, 1, 4, 2, 3).float() / 255.0
    if kind == "act":  # one-frame policy: no time axis, as lerobot's datasets deliver it
        state, image = state[:, -1], image[:, -1]
    assert set(got) == {"observation.state", "observation.images.front"}
    assert torch.equal(got["observation.state"], state)
    assert torch.equal(got["observation.images.front"], image)
    assert got["observation.images.front"].max() <= 1.0
    # image (0, 0, h=1, w=2, c=1) lands at (0, 0, c=1, h=1, w=2), scaled to [0, 1]
    raw = int(obs["images/front"][0, 0, 1, 2, 1])
    img = got["observation.images.front"]
    assert (img[0, 0, 1, 1, 2] if kind == "diffusion" else img[0, 1, 1, 2]) == raw / 255.0

    s = _adapter(kind, images=False)
    got = s.to_lerobot_batch(obs)
    env = obs["state/cube_pos"] if kind == "diffusion" else obs["state/cube_pos"][:, -1]
    assert torch.equal(got["observation.environment_state"], env)
    assert got["observation.state"].shape[-1] == 8  # joint_pos + gripper


@pytest.mark.lerobot
@pytest.mark.parametrize("kind", ["diffusion", "act"])
def test_compute_loss_trains(kind: str) -> None:
    p = _adapter(kind, images=False).train()
    length = 8 if kind == "diffusion" else 6  # diffusion: horizon; ACT: chunk_size
    batch = {"obs": _obs(TO[kind], False), "action": torch.rand(B, length, DA) * 2 - 1}
    loss, logs = p.compute_loss(batch)
    loss.backward()
    assert torch.isfinite(loss) and logs["loss"] == pytest.approx(loss.item())
    assert any(q.grad is not None and q.grad.abs().sum() > 0 for q in p.parameters())
    with pytest.raises(ValueError, match="action must be"):
        p.compute_loss({**batch, "action": torch.zeros(B, length + 1, DA)})


@pytest.mark.lerobot
@pytest.mark.parametrize("kind", ["diffusion", "act"])
def test_drives_the_sim_through_chunk_runner(kind: str) -> None:
    import sim
    from robotrl.chunk_runner import ChunkRunner
    from robotrl.policy_env import rollout_policy

    p = _adapter(kind, images=True)
    env = sim.make("lift", cameras=("front",), image_size=(SIZE, SIZE), max_episode_steps=20)
    runner = ChunkRunner(p, num_envs=1, execute_horizon=p.execute_horizon)
    try:
        obs, _ = env.reset(seed=0)
        runner.reset()
        first = runner.plan_first(0, obs)
        assert first.shape == (DA,) and first.dtype == np.float32 and np.abs(first).max() <= 1
        for _ in range(6):
            a = runner.act({k: np.asarray(v)[None] for k, v in obs.items()})
            assert a.shape == (1, DA) and np.abs(a).max() <= 1
            obs, *_ = env.step(a[0])
        assert runner.inference_calls == 2  # 6 steps, 4 executed per chunk
        assert runner.plan_first(0, obs).shape == (DA,)
        assert len(runner.queues[0]) == 2  # plan_first left the queue alone
    finally:
        env.close()
    res = rollout_policy(
        p,
        "lift",
        {"cameras": ("front",), "image_size": (SIZE, SIZE), "max_episode_steps": 8},
        episodes=1,
        execute_horizon=p.execute_horizon,
        progress=False,
    )
    assert res.episodes == 1 and res.lengths == [8]


@pytest.mark.lerobot
def test_bad_inputs_raise_clear_errors() -> None:
    p = _adapter("diffusion", images=True)
    obs = _obs(2, images=True)
    with pytest.raises(KeyError, match="images/front"):
        p.predict_chunk({k: v for k, v in obs.items() if k != "images/front"})
    with pytest.raises(ValueError, match=r"state/gripper must be \(B=3, To=2, D=1\)"):
        p.predict_chunk({**obs, "state/gripper": torch.zeros(B, 2, 2)})
    with pytest.raises(ValueError, match="To=2"):
        p.predict_chunk({k: v[:, :1] for k, v in obs.items()})
    with pytest.raises(ValueError, match="must be uint8"):
        p.predict_chunk({**obs, "images/front": obs["images/front"].float()})
    with pytest.raises(ValueError, match="H=32, W=32"):
        p.predict_chunk({**obs, "images/front": obs["images/front"][:, :, :16]})
    with pytest.raises(ValueError, match="noise is only meaningful for diffusion"):
        _adapter("act", images=False).predict_chunk(_obs(1, False), noise=torch.zeros(B, 6, DA))
    # construction: dims, cameras and keys that do not fit the lerobot config
    with pytest.raises(
        ValueError,
        match=r"observation\.state of dim 11, .* \[.state/joint_pos.\] sum to 7",
    ):
        LeRobotPolicyAdapter(
            p.policy, p.preprocessor, p.postprocessor, {"state/joint_pos": 7}, ["images/front"]
        )
    with pytest.raises(ValueError, match="reads cameras"):
        LeRobotPolicyAdapter(p.policy, p.preprocessor, p.postprocessor, STATE_DIMS, [])


def test_imports_without_lerobot_and_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # the module imported at the top of this file without lerobot; now make lerobot missing
    # (as in the main env) and use it
    monkeypatch.setitem(sys.modules, "lerobot", None)
    with pytest.raises(ImportError, match=r"\.ci/lerobot_env\.sh"):
        LeRobotPolicyAdapter.from_config("diffusion", state_dims=STATE_DIMS, action_dim=DA)
    with pytest.raises(ImportError, match=r"\.ci/lerobot_env\.sh"):
        LeRobotPolicyAdapter.from_pretrained("/nonexistent", state_dims=STATE_DIMS)
