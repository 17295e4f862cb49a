"""One-step distillation: the student reproduces the K-step teacher from the same noise with
one network evaluation, saves and loads like any policy."""

import numpy as np
import pytest
import torch

from policies.checkpoint import load_policy, read_config, save_policy
from policies.diffusion import DiffusionPolicy
from policies.distillation import (
    DistillConfig,
    DistilledPolicy,
    distill,
    match_error,
    teacher_target,
)
from policies.flow_matching import FlowMatchingPolicy

STATS = {
    "state/x": {"mean": np.zeros(3), "std": np.ones(3)},
    "action": {"min": -np.ones(2), "max": np.ones(2)},
}
B, TA = 32, 4


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny nets: one intra-op thread is fastest, and much faster on a busy machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _batch(g):
    """Bimodal conditional chunks: a = 0.5 tanh(x) +- 0.3 (the sign is the hidden mode)."""
    x = torch.randn(B, 2, 3, generator=g)
    sign = torch.where(torch.rand(B, generator=g) < 0.5, -1.0, 1.0)
    a = 0.5 * torch.tanh(x[:, -1, :2])[:, None, :] + 0.3 * sign[:, None, None]
    return {"obs": {"state/x": x}, "action": a.expand(B, TA, 2).clone()}


class Loader:
    def __init__(self, seed, n=20):
        self.seed, self.n = seed, n

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed)
        return iter([_batch(g) for _ in range(self.n)])


@pytest.fixture(scope="module")
def teacher(one_thread):
    torch.manual_seed(0)
    p = FlowMatchingPolicy(
        {"state/x": 3},
        action_dim=2,
        action_horizon=TA,
        num_steps=8,
        hidden=48,
        obs_feature_dim=32,
        stats=STATS,
    )
    opt = torch.optim.Adam(p.parameters(), 2e-3)
    g = torch.Generator().manual_seed(1)
    for _ in range(150):
        loss, _ = p.compute_loss(_batch(g))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return p.eval()


class CallCounter:
    def __init__(self, module):
        self.n = 0
        module.register_forward_hook(lambda *a: setattr(self, "n", self.n + 1))


def test_student_starts_as_the_one_step_teacher(teacher):
    student = DistilledPolicy.from_teacher(teacher).eval()
    obs, noise = Loader(5, 1).__iter__().__next__()["obs"], torch.randn(B, TA, 2)
    one_step = FlowMatchingPolicy(**{**teacher.config, "num_steps": 1}).eval()
    one_step.load_state_dict(teacher.state_dict())
    torch.testing.assert_close(
        student.predict_chunk(obs, noise=noise), one_step.predict_chunk(obs, noise=noise)
    )


@pytest.mark.slow
def test_student_matches_the_teacher_with_one_network_call(teacher):
    val = list(Loader(99, 4))
    before = match_error(DistilledPolicy.from_teacher(teacher).eval(), teacher, val)
    enc_before = {k: v.clone() for k, v in teacher.encoder.state_dict().items()}
    student, summary = distill(
        teacher, Loader(7), steps=250, cfg=DistillConfig(lr=1e-3, warmup=10), progress=False
    )
    after = match_error(student, teacher, val)
    assert summary["steps"] == 250 and not student.training
    assert after < 0.15 * before, (before, after)
    # same noise and observation -> the student's chunk is the teacher's, closely
    obs, noise = val[0]["obs"], torch.randn(B, TA, 2, generator=torch.Generator().manual_seed(3))
    s_out, t_out = student.predict_chunk(obs, noise=noise), teacher.predict_chunk(obs, noise=noise)
    assert (s_out - t_out).abs().mean() < 0.05
    assert (s_out - t_out).abs().mean() < 0.2 * t_out.std()
    # the encoder was frozen: features identical to the teacher's, teacher untouched
    torch.testing.assert_close(student.encode(obs), teacher.encode(obs))
    for k, v in teacher.encoder.state_dict().items():
        assert torch.equal(v, enc_before[k])
    # one network evaluation per chunk for the student, K for the teacher
    s_calls, t_calls = CallCounter(student.net), CallCounter(teacher.net)
    student.predict_chunk(obs)
    teacher.predict_chunk(obs)
    assert (s_calls.n, t_calls.n) == (1, teacher.num_steps)


def test_diffusion_teacher_target_is_its_ddim_output_and_a_student_builds():
    torch.manual_seed(0)
    t = DiffusionPolicy(
        {"state/x": 3}, action_dim=2, action_horizon=TA, hidden=32, obs_feature_dim=16, stats=STATS
    ).eval()
    obs, noise = {"state/x": torch.randn(3, 2, 3)}, torch.randn(3, TA, 2)
    torch.testing.assert_close(
        t.normalizer.unnormalize("action", teacher_target(t, obs, noise)),
        t.predict_chunk(obs, noise=noise),
    )
    s, _ = distill(t, [{"obs": obs}], steps=3, progress=False)
    assert s.config["teacher_type"] == "diffusion" and s.config["teacher_steps"] == 10
    assert s.predict_chunk(obs).shape == (3, TA, 2)


def test_checkpoint_round_trip(tmp_path, teacher):
    student = DistilledPolicy.from_teacher(teacher).eval()
    with torch.no_grad():
        student.net.out.bias.add_(0.1)  # differ from any fresh init
    obs, noise = {"state/x": torch.randn(5, 2, 3)}, torch.randn(5, TA, 2)
    before = student.predict_chunk(obs, noise=noise)
    save_policy(student, tmp_path / "s", meta={"task": "lift", "teacher": "x"})
    assert read_config(tmp_path / "s")["policy_type"] == "distilled"
    loaded, meta = load_policy(tmp_path / "s")
    assert isinstance(loaded, DistilledPolicy) and meta["teacher"] == "x"
    assert torch.equal(loaded.predict_chunk(obs, noise=noise), before)


def test_bad_inputs_are_clear_errors(teacher):
    student = DistilledPolicy.from_teacher(teacher)
    with pytest.raises(ValueError, match="noise' and 'target"):
        student.compute_loss({"obs": {"state/x": torch.randn(2, 2, 3)}, "action": None})
    with pytest.raises(ValueError, match="noise must be"):
        student.predict_chunk({"state/x": torch.randn(2, 2, 3)}, noise=torch.randn(2, 3, 2))
    with pytest.raises(ValueError, match="teacher must be"):
        DistilledPolicy.from_teacher(student)
    with pytest.raises(ValueError, match="no batches"):
        distill(teacher, [], steps=1, progress=False)
