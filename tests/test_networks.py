import torch

from robotrl.algos.networks import EnsembleCritic, EnsembleLinear, mlp


def test_ensemble_linear_equals_independent_layers():
    torch.manual_seed(0)
    layer = EnsembleLinear(3, 4, 5)
    x = torch.randn(3, 7, 4)
    out = layer(x)
    for e in range(3):
        ref = x[e] @ layer.weight[e] + layer.bias[e]
        assert torch.allclose(out[e], ref, atol=1e-6)


def test_critic_members_differ_and_shapes():
    torch.manual_seed(0)
    critic = EnsembleCritic(6, 2, hidden=32, ensemble=4)
    q = critic(torch.randn(9, 6), torch.randn(9, 2))
    assert q.shape == (4, 9)
    assert not torch.allclose(q[0], q[1])
    assert any(isinstance(m, torch.nn.LayerNorm) for m in critic.modules())
    assert not any(
        isinstance(m, torch.nn.LayerNorm) for m in EnsembleCritic(6, 2, layer_norm=False).modules()
    )


def test_mlp_layout():
    net = mlp(3, 2, hidden=8, layers=2, layer_norm=True)
    assert [type(m).__name__ for m in net] == [
        "Linear",
        "LayerNorm",
        "ReLU",
        "Linear",
        "LayerNorm",
        "ReLU",
        "Linear",
    ]
