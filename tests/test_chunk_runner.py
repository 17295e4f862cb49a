import numpy as np
import pytest
import torch

from robotrl.chunk_runner import ChunkRunner, SingleEnvPolicy


class Recorder:
    """Fake chunk policy: the chunk encodes the call number and the last observation."""

    obs_horizon, action_horizon, action_dim = 2, 4, 1

    def __init__(self):
        self.config = {"state_dims": {"state/x": 1}, "image_keys": []}
        self.calls = []

    def reset(self):
        pass

    def predict_chunk(self, obs):
        x = obs["state/x"]
        self.calls.append(x.clone())
        n = len(self.calls)
        out = torch.zeros(x.shape[0], 4, 1)
        out[:, :, 0] = n * 100 + torch.arange(4)[None] + 10 * x[:, -1, 0:1]
        return out


def test_chunks_execute_open_loop_and_history_is_edge_padded():
    p = Recorder()
    r = ChunkRunner(p, num_envs=2, execute_horizon=3)
    actions = [r.act({"state/x": np.array([[float(t)], [float(-t)]])})[:, 0] for t in range(7)]
    # One inference per 3 steps, batched over both envs.
    assert len(p.calls) == 3 and r.inference_calls == 3
    # First call: history padded with the first observation (To = 2).
    assert p.calls[0][:, :, 0].tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert p.calls[1][:, :, 0].tolist() == [[2.0, 3.0], [-2.0, -3.0]]
    np.testing.assert_allclose(actions[0], [100, 100])
    np.testing.assert_allclose(actions[2], [102, 102])
    np.testing.assert_allclose(actions[3], [200 + 30, 200 - 30])


def test_reset_one_env_replans_only_that_env():
    p = Recorder()
    r = ChunkRunner(p, num_envs=2, execute_horizon=3)
    r.act({"state/x": np.zeros((2, 1))})
    r.reset([1])
    r.act({"state/x": np.ones((2, 1))})
    assert len(p.calls) == 2 and p.calls[1].shape[0] == 1  # only env 1 needed a chunk
    assert p.calls[1][0, :, 0].tolist() == [1.0, 1.0]  # fresh history after its reset


def test_missing_key_and_bad_horizon_are_clear_errors():
    with pytest.raises(ValueError, match="execute_horizon"):
        ChunkRunner(Recorder(), execute_horizon=5)
    with pytest.raises(KeyError, match="state/x"):
        ChunkRunner(Recorder(), execute_horizon=2).act({"state/y": np.zeros((1, 1))})


def test_single_env_adapter():
    pol = SingleEnvPolicy(Recorder(), execute_horizon=2)
    pol.reset()
    a = pol({"state/x": np.array([1.0])})
    assert a.shape == (1,) and a.dtype == np.float32 and a[0] == 110.0


class Instructed(Recorder):
    """Fake language-conditioned chunk policy: the chunk's value is the first token id."""

    class Tokenizer:
        def encode_batch(self, texts):
            ids = np.array([[len(t)] for t in texts], dtype=np.int64)
            return ids, np.ones_like(ids, dtype=bool)

    tokenizer = Tokenizer()

    def predict_chunk(self, obs):
        self.calls.append(obs["language"].clone())
        return obs["language"][:, None, :1].float().expand(-1, 4, 1)


def test_instructions_are_tokenised_for_chunks_and_for_a_terminal_plan():
    p = Instructed()
    r = ChunkRunner(p, num_envs=2, execute_horizon=2)
    obs = {"state/x": np.zeros((2, 1)), "language": np.array(["lift", "place it"])}
    np.testing.assert_allclose(r.act(obs)[:, 0], [4, 8])
    # the first action of a fresh plan at a terminal observation, history and queue untouched
    after = {"state/x": np.zeros(1), "language": np.array("put it down")}
    assert r.plan_first(1, after)[0] == 11
    np.testing.assert_allclose(r.act(obs)[:, 0], [4, 8])  # the queued second actions
    assert len(p.calls) == 2
