"""The kept weights are those of the best evaluation (the latest among equals), the untrained
ones unless an evaluation beats the first, or the last with ``keep_best=False``."""

import pytest
import torch
from torch import nn

from robotrl.algos.kept_agent import KeptAgent, best_evaluation


@pytest.mark.parametrize(
    ("rates", "keep_best", "kept"),
    [
        ([0.2, 0.5, 0.3, 0.5, 0.1], True, 3),  # the latest of the best evaluations
        ([0.5, 0.2, 0.1, 0.4, 0.3], True, 0),  # nothing beat the first: the untrained weights
        ([0.3, 0.3, 0.2, 0.3, 0.1], True, 0),  # a tie with the first does not replace it
        ([0.3, 0.3, 0.4, 0.4, 0.1], True, 3),  # past the first: the latest of the best
        ([0.2, 0.5, 0.3, 0.5, 0.1], False, 4),  # the last weights
    ],
)
def test_the_weights_kept_are_those_of_the_best_evaluation(rates, keep_best, kept):
    module = nn.Linear(2, 1)
    keeper = KeptAgent(module, keep_best)
    for i, rate in enumerate(rates):  # evaluation i sees every weight set to i
        with torch.no_grad():
            for p in module.parameters():
                p.fill_(float(i))
        assert keeper.evaluated(rate, env_steps=100 * i) == (
            keep_best and keeper.env_steps == 100 * i
        )
    assert keeper.restore(env_steps=100 * (len(rates) - 1)) == 100 * kept
    for p in module.parameters():
        assert torch.equal(p, torch.full_like(p, float(kept)))


def test_without_an_evaluation_the_last_weights_stay():
    module = nn.Linear(2, 1)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    assert KeptAgent(module).restore(env_steps=70) == 70
    assert all(torch.equal(v, before[k]) for k, v in module.state_dict().items())


def test_the_kept_weights_are_a_copy_not_a_view():
    module = nn.Linear(2, 1)
    keeper = KeptAgent(module)
    keeper.evaluated(0.5, env_steps=0)
    kept = {k: v.clone() for k, v in module.state_dict().items()}
    with torch.no_grad():
        module.weight.add_(1.0)  # training moves the weights in place
    keeper.restore(env_steps=10)
    assert all(torch.equal(v, kept[k]) for k, v in module.state_dict().items())


def test_best_evaluation_of_a_whole_run():
    assert best_evaluation([0.2, 0.5, 0.3, 0.5, 0.1]) == 3
    assert best_evaluation([0.5, 0.2, 0.6]) == 2
    assert best_evaluation([0.3, 0.3, 0.1]) == 0  # a tie with the first keeps the first
    assert best_evaluation([0.0]) == 0
    with pytest.raises(ValueError, match="no evaluation"):
        best_evaluation([])
