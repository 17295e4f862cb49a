"""Tiny VLA: shapes, exact chain log-prob recompute (Flow-SDE hybrid and Flow-Noise), the
instruction steers the actions after brief training, checkpoints round trip, and the chunk
runner feeds it the env's instruction."""

import numpy as np
import pytest
import torch
from tiny_vla import tiny_vla

from policies.checkpoint import load_policy, save_policy
from policies.registry import make_policy
from policies.tokenizer import WordTokenizer
from policies.vla import TinyVLA
from robotrl.chunk_runner import ChunkRunner, policy_keys

VOCAB = WordTokenizer.from_texts(["go left", "go right"]).vocab
STATS = {
    "state/x": {"mean": np.zeros(3), "std": np.ones(3)},
    "action": {"min": -np.ones(2), "max": np.ones(2)},
}


def _policy(**kw):
    kw.setdefault("image_keys", ["images/front"])
    return tiny_vla({"state/x": 3}, ["go left", "go right"], max_tokens=4, **kw)


def _obs(p, texts, seed=0, images=True):
    g = torch.Generator().manual_seed(seed)
    b = len(texts)
    obs = {"state/x": torch.randn(b, 2, 3, generator=g), "language": p.tokenize(texts)}
    if images:
        obs["images/front"] = torch.randint(0, 256, (b, 2, 16, 16, 3), generator=g).to(torch.uint8)
    return obs


@pytest.fixture
def one_thread():
    """Tiny matrices: intra-op thread hand-offs cost more than they save on a busy machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _slice(obs, i, j):
    return {k: v[i:j] for k, v in obs.items()}


@pytest.mark.parametrize("expert", ["transformer", "mlp"])
def test_shapes_and_features(expert):
    p = _policy(expert=expert).eval()
    obs = _obs(p, ["go left", "go right", "go left"])
    with torch.no_grad():
        out = p.sample_chain(obs, mode="noise_net")
    assert out["chain"].shape == (3, 5, 4, 2)
    assert out["log_prob"].shape == out["stochastic"].shape == (3, 4)
    assert out["action"].shape == (3, 4, 2) and out["action"].abs().max() <= 1.0
    assert out["obs_features"].shape == (3, 2 * 32)
    assert out["expert_features"].shape == (3, 32)
    assert p.predict_chunk(obs).shape == (3, 4, 2)


@pytest.mark.parametrize("expert", ["transformer", "mlp"])
@pytest.mark.parametrize("mode", ["sde", "noise_net"])
def test_log_prob_recomputes_exactly(mode, expert, one_thread):
    p = _policy(expert=expert)
    with torch.no_grad():  # non-trivial noise head, so Flow-Noise stds differ per element
        p.noise_head.weight.normal_(0, 0.5)
    obs = _obs(p, ["go left", "go right"] * 16)
    k_star = torch.randint(0, 4, (32,)) if mode == "sde" else None
    p.eval()
    with torch.no_grad():
        out = p.sample_chain(obs, mode=mode, k_star=k_star)
    # Recomputed with gradients, in minibatches of another size, as a PPO learner does:
    parts = [
        p.log_prob(
            _slice(obs, i, i + 8),
            out["chain"][i : i + 8],
            mode=mode,
            k_star=None if k_star is None else k_star[i : i + 8],
        )
        for i in range(0, 32, 8)
    ]
    lp = torch.cat(parts)
    assert lp.requires_grad
    ratio = torch.exp(lp.sum(1) - out["log_prob"].sum(1)).detach()
    assert torch.allclose(ratio, torch.ones_like(ratio), atol=1e-5)
    if mode == "sde":
        assert (out["stochastic"].sum(1) == 1).all()
        assert (out["stochastic"].float().argmax(1) == k_star).all()
    else:
        assert out["stochastic"].all()


def test_padding_tokens_do_not_change_the_features():
    p = _policy().eval()
    obs = _obs(p, ["go left"])
    with torch.no_grad():
        ref = p.encode(obs)
        p.encoder.token_embed.weight[0].normal_()  # the pad embedding: attention must ignore it
        obs["language"] = obs["language"].clone()
        assert (obs["language"][0, 2:] == 0).all()
        assert torch.allclose(p.encode(obs), ref, atol=1e-6)


def test_instruction_steers_the_actions(one_thread):
    """Same states, the instruction alone names the target (+0.6 or -0.6 on both action
    dims): a short training run must follow the instruction."""
    p = _policy(stats=STATS, image_keys=[])
    opt = torch.optim.Adam(p.parameters(), lr=3e-3)
    texts = ["go left", "go right"] * 32
    sign = torch.tensor([-1.0, 1.0] * 32)
    for step in range(150):
        obs = _obs(p, texts, seed=step, images=False)
        target = 0.6 * sign[:, None, None].expand(64, 4, 2)
        loss, _ = p.compute_loss({"obs": obs, "action": target})
        opt.zero_grad()
        loss.backward()
        opt.step()
    p.eval()
    obs = _obs(p, ["go left", "go right"], seed=999, images=False)
    obs["state/x"][1] = obs["state/x"][0]  # identical state, different instruction
    noise = torch.randn(1, 4, 2).expand(2, 4, 2)
    a = p.predict_chunk(obs, noise=noise)
    assert (a[0] < -0.4).all() and (a[1] > 0.4).all(), a


def test_checkpoint_round_trip_gives_identical_actions(tmp_path):
    p = _policy(stats=STATS).eval()
    save_policy(p, tmp_path / "ckpt", meta={"task": "pick_color"})
    q, meta = load_policy(tmp_path / "ckpt")
    assert isinstance(q, TinyVLA) and meta["task"] == "pick_color"
    assert q.tokenizer.vocab == p.tokenizer.vocab
    obs = _obs(p, ["go left", "go right"])
    noise = torch.randn(2, 4, 2)
    assert torch.equal(q.predict_chunk(obs, noise), p.predict_chunk(obs, noise))


def test_registry_and_config_rebuild():
    p = _policy(stats=STATS)
    q = make_policy("vla", **p.config)
    assert sum(x.numel() for x in q.parameters()) == sum(x.numel() for x in p.parameters())


def test_validation():
    with pytest.raises(ValueError, match="expert"):
        _policy(expert="lstm")
    p = _policy().eval()
    obs = _obs(p, ["go left"])
    with pytest.raises(KeyError, match="language"):
        p.encode({k: v for k, v in obs.items() if k != "language"})
    with pytest.raises(ValueError, match="integer ids"):
        p.encode({**obs, "language": obs["language"].float()})
    with pytest.raises(ValueError, match="To=2"):
        p.encode({**obs, "state/x": obs["state/x"][:, :1]})


def test_chunk_runner_tokenises_the_env_instruction():
    p = _policy(image_keys=[]).eval()
    assert policy_keys(p) == ["state/x", "language"]
    runner = ChunkRunner(p, num_envs=2, execute_horizon=2)
    seen = []
    original = p.predict_chunk

    def spy(batch, noise=None):
        seen.append(batch["language"].clone())
        return original(batch, torch.zeros(len(batch["language"]), 4, 2))

    p.predict_chunk = spy
    obs = {"state/x": np.zeros((2, 3), np.float32), "language": ("go left", "go right")}
    actions = runner.act(obs)
    assert actions.shape == (2, 2)
    np.testing.assert_array_equal(
        seen[0].numpy(), p.tokenizer.encode_batch(["go left", "go right"])[0]
    )
    assert not np.allclose(actions[0], actions[1])
    with pytest.raises(KeyError, match="language"):
        ChunkRunner(p, 1, 2).act({"state/x": np.zeros((1, 3), np.float32)})


def test_image_tokens_are_pooled_to_the_grid():
    """A 64 px camera leaves an 8 x 8 CNN map; the prefix sees image_grid**2 tokens of it plus
    one keypoint token, per camera and step."""
    p = _policy(image_grid=2)
    img = torch.randint(0, 256, (3, 2, 64, 64, 3)).to(torch.uint8)
    tok, points = p.encoder._image_tokens("images/front", img, 0)
    assert points.shape == (3, 2 * 16)  # the last step's keypoints
    assert tok.shape == (3, 2 * (2 * 2 + 1), 32)
    assert p.config["image_grid"] == 2
    with pytest.raises(ValueError, match="image_grid must be >= 1"):
        _policy(image_grid=0)


AUX_STATS = {**STATS, "state/obj": {"mean": np.full(3, 0.5), "std": np.full(3, 0.1)}}


def test_auxiliary_head_learns_the_privileged_state(one_thread):
    """The aux head is trained on normalised targets, joins the loss, and inference needs no
    privileged entry."""
    p = _policy(aux_dims={"state/obj": 3}, stats=AUX_STATS, aux_input="readout")
    obs = _obs(p, ["go left", "go right"] * 8)
    g = torch.Generator().manual_seed(1)
    obs["state/obj"] = 0.5 + 0.1 * torch.randn(16, 2, 3, generator=g)
    batch = {"obs": obs, "action": torch.rand(16, 4, 2, generator=g) * 2 - 1}
    opt = torch.optim.Adam(p.parameters(), 3e-3)
    first = None
    for _ in range(60):
        loss, logs = p.compute_loss(batch)
        assert logs["loss"] == pytest.approx(logs["flow_loss"] + logs["aux_loss"], rel=1e-5)
        first = first if first is not None else logs["aux_loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert logs["aux_loss"] < 0.3 * first
    p.eval()
    plain = {k: v for k, v in obs.items() if k != "state/obj"}
    assert p.predict_chunk(plain).shape == (16, 4, 2)
    with pytest.raises(KeyError, match="auxiliary loss needs"):
        p.train().compute_loss({"obs": plain, "action": batch["action"]})
    with pytest.raises(ValueError, match="also inputs"):
        _policy(aux_dims={"state/x": 3})
    assert make_policy("vla", **p.config).config["aux_dims"] == {"state/obj": 3}


def test_state_token_is_the_true_state_in_training_and_the_prediction_at_inference(one_thread):
    p = _policy(
        aux_dims={"state/obj": 3},
        stats=AUX_STATS,
        expert_input="readout+state",
        aux_input="readout",
        state_token_noise=0.0,
    )
    obs = _obs(p, ["go left", "go right"])
    obs["state/obj"] = torch.full((2, 2, 3), 0.7)
    p.eval()
    with torch.no_grad():
        readout = p.encoder(obs, p.normalizer)
        predicted = p.state_token(p.predict_state(readout, None, None))
        torch.testing.assert_close(p.encode(obs), torch.cat([readout, predicted], dim=-1))
        # training conditions the expert on the true state: moving it moves the flow loss
        torch.manual_seed(3)
        a, _ = p.compute_loss({"obs": obs, "action": torch.zeros(2, 4, 2)})
        obs["state/obj"] = torch.full((2, 2, 3), 0.2)
        torch.manual_seed(3)
        b, _ = p.compute_loss({"obs": obs, "action": torch.zeros(2, 4, 2)})
    assert not torch.isclose(a, b)
    with pytest.raises(ValueError, match="needs aux_dims"):
        _policy(expert_input="state")
    with pytest.raises(ValueError, match="expert_input must be one of"):
        _policy(expert_input="pixels")


@pytest.mark.parametrize(
    ("expert", "aux_input"), [("transformer", "keypoints"), ("mlp", "readout")]
)
def test_state_input_hides_the_images_from_the_expert(expert, aux_input, one_thread):
    """expert_input="state": the expert's conditioning is the state token, the instruction and
    the proprioception; the images change it only through the predicted state."""
    p = _policy(
        aux_dims={"state/obj": 3},
        stats=AUX_STATS,
        expert_input="state",
        expert=expert,
        aux_input=aux_input,
    ).eval()
    obs = _obs(p, ["go left", "go right"])
    with torch.no_grad():
        cond = p.encode(obs)
        assert cond.shape == (2, 3 * 32)
        readout, points, rest, choice = p._parts(obs)
        if aux_input == "keypoints":  # nothing reads the readout: the trunk is skipped
            assert readout.shape == (2, 0)
        state = p.predict_state(readout, points, rest, choice)
        torch.testing.assert_close(cond[:, :32], p.state_token(state))
        words = p._condition(readout, rest, state)[:, 32:64]
        swapped = {**obs, "language": p.tokenize(["go right", "go left"])}
        other = p._condition(readout, p._parts(swapped)[2], state)
    assert not torch.allclose(words, other[:, 32:64])  # the instruction token reads the words
    assert p.predict_chunk(obs).shape == (2, 4, 2)


def _compose_error(aux_input: str, steps: int = 400) -> tuple[float, float]:
    """Train the auxiliary head alone to name one of three objects whose positions the
    keypoints carry, on four of the six verb x colour pairs; return its normalised error on
    the seen pairs and on the two held-out ones."""
    verbs = {"lift": "lift the {} cube", "place": "put the {} cube on the pad"}
    colours = ["red", "green", "blue"]
    seen = [("lift", "red"), ("lift", "green"), ("place", "red"), ("place", "blue")]
    held_out = [("lift", "blue"), ("place", "green")]
    texts = [verbs[v].format(c) for v in verbs for c in colours]
    aux = {"state/objs": 9, "state/target_pos": 3}
    p = tiny_vla(
        {"state/x": 3},
        texts,
        image_keys=["images/front"],
        aux_dims=aux,
        aux_input=aux_input,
        keypoints=8,
    )
    g = torch.Generator().manual_seed(0)

    def batch(pairs, n):
        pick = torch.randint(0, len(pairs), (n,), generator=g)
        objs = torch.randn(n, 3, 3, generator=g)
        points = torch.cat([objs.flatten(1), torch.randn(n, 7, generator=g)], dim=-1)
        names = [colours.index(pairs[i][1]) for i in pick.tolist()]
        obs = {
            "language": p.tokenize([verbs[pairs[i][0]].format(pairs[i][1]) for i in pick]),
            "state/x": torch.zeros(n, 1, 3),
        }
        rest = p.prefix.instruction_and_proprio(obs, p.normalizer)
        choice = p.choose(obs) if aux_input == "grounded" else None
        target = torch.cat([objs.flatten(1), objs[torch.arange(n), names]], dim=-1)
        return points, rest, choice, target

    opt = torch.optim.Adam(p.parameters(), 3e-3)
    for _ in range(steps):
        points, rest, choice, target = batch(seen, 64)
        loss = torch.mean((p.predict_state(None, points, rest, choice) - target) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
    p.eval()
    with torch.no_grad():
        errors = []
        for pairs in (seen, held_out):
            points, rest, choice, target = batch(pairs, 256)
            error = p.predict_state(None, points, rest, choice) - target
            errors.append(float(torch.mean(error[:, 9:] ** 2)))
    return errors[0], errors[1]


def test_grounded_head_names_objects_in_held_out_pairs(one_thread):
    """The grounded head learns what each colour word names from the seen pairs and composes
    it with the other verb; the head that regresses from the mean word embedding learns only
    the seen combinations."""
    seen, held_out = _compose_error("grounded")
    assert seen < 0.05 and held_out < 0.1
    plain_seen, plain_held_out = _compose_error("keypoints")
    assert plain_seen < 0.2 and plain_held_out > 4 * held_out


def test_grounded_head_needs_instructed_entries():
    with pytest.raises(ValueError, match="needs cameras and instructed"):
        _policy(aux_dims={"state/obj": 3}, stats=AUX_STATS, aux_input="grounded")
    with pytest.raises(ValueError, match="not in aux_dims"):
        _policy(aux_dims={"state/obj": 3}, stats=AUX_STATS, aux_instructed=["state/other"])


def test_encode_with_a_given_state_is_the_oracle_of_the_perception(one_thread):
    """encode(obs, state=...) puts the given normalised state in the state token instead of the
    auxiliary head's estimate (bench/vla_oracle.py)."""
    p = _policy(aux_dims={"state/obj": 3}, stats=AUX_STATS, expert_input="state").eval()
    obs = _obs(p, ["go left", "go right"])
    truth = torch.full((2, 3), 0.3)
    with torch.no_grad():
        cond = p.encode(obs, state=truth)
        torch.testing.assert_close(cond[:, :32], p.state_token(truth))
        assert not torch.allclose(cond, p.encode(obs))
    with pytest.raises(ValueError, match="no state token"):
        _policy().encode(obs, state=truth)
