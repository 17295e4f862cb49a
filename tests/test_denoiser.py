import torch

from policies.denoiser import ChunkDenoiser, time_embedding


def test_time_embedding_is_sinusoidal_and_distinguishes_times():
    e = time_embedding(torch.tensor([0.0, 0.5, 1.0]), 64)
    assert e.shape == (3, 64)
    assert torch.allclose(e[0, :32], torch.zeros(32)) and torch.allclose(e[0, 32:], torch.ones(32))
    assert not torch.allclose(e[1], e[2])


def test_denoiser_shapes_and_conditioning():
    torch.manual_seed(0)
    net = ChunkDenoiser(action_dim=2, horizon=4, cond_dim=8, hidden=32, depth=2)
    x, t = torch.randn(3, 4, 2), torch.rand(3)
    out, feat = net(x, t, torch.zeros(3, 8))
    assert out.shape == (3, 4, 2) and feat.shape == (3, 32)
    out2, _ = net(x, t, torch.ones(3, 8))
    assert not torch.allclose(out, out2)  # the observation features reach the output
    out3, _ = net(x, torch.tensor(0.3), torch.zeros(3, 8))  # a scalar time broadcasts
    assert out3.shape == (3, 4, 2)
