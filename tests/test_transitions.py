"""Transition flattening, schema checks and the safetensors wire encoding (no pickle)."""

from __future__ import annotations

import numpy as np
import pytest

from robotrl.distributed.transitions import (
    SchemaError,
    TransitionSchema,
    decode_arrays,
    decode_batch,
    encode_arrays,
    flatten_transition,
    stack,
    state_dict_arrays,
)


def _transition(rng: np.random.Generator, i: int = 0) -> dict:
    obs = {
        "state/ee_pos": rng.normal(size=3).astype(np.float32),
        "images/front": rng.integers(0, 256, (8, 6, 3), dtype=np.uint8),
        "state/q": rng.normal(size=7),  # float64
    }
    nxt = {k: v + 1 for k, v in obs.items()}
    return dict(
        obs=obs,
        action=rng.uniform(-1, 1, 7).astype(np.float32),
        reward=float(i),
        next_obs=nxt,
        terminated=i % 5 == 4,
        truncated=False,
        env_id=i % 2,
        extras={"intervention": np.bool_(i % 3 == 0), "cost": np.int16(-i)},
    )


def test_batch_round_trip_is_bitwise_with_dtypes_and_shapes():
    rng = np.random.default_rng(0)
    ts = [_transition(rng, i) for i in range(5)]
    ts[2]["obs"]["state/ee_pos"][0] = np.nan  # NaN bits must survive too
    rows = [flatten_transition(**t) for t in ts]
    batch = decode_batch(encode_arrays(stack(rows)), TransitionSchema.of(rows[0]))
    assert len(batch) == 5
    for i, t in enumerate(ts):
        for k, v in t["obs"].items():
            got = batch.obs[k][i]
            assert got.dtype == v.dtype and got.shape == v.shape
            assert got.tobytes() == v.tobytes()
            assert batch.next_obs[k][i].tobytes() == t["next_obs"][k].tobytes()
        assert batch.action[i].tobytes() == t["action"].tobytes()
        assert batch.reward[i] == np.float32(i) and batch.reward.dtype == np.float32
        assert batch.terminated[i] == t["terminated"] and batch.terminated.dtype == bool
        assert batch.env_id[i] == t["env_id"] and batch.env_id.dtype == np.int64
        assert batch.extras["intervention"][i] == t["extras"]["intervention"]
        assert batch.extras["cost"].dtype == np.int16 and batch.extras["cost"][i] == -i


def test_rows_feed_the_replay_buffer():
    from robotrl.datasets.replay_buffer import ReplayBuffer

    rng = np.random.default_rng(1)
    rows = [flatten_transition(**_transition(rng, i)) for i in range(6)]
    batch = decode_batch(encode_arrays(stack(rows)))
    spec = {k: (v.shape[1:], v.dtype) for k, v in batch.obs.items()}
    buf = ReplayBuffer(16, spec, action_dim=7, num_envs=2)
    for row in batch.rows():
        buf.add(**row)
    assert len(buf) == 6
    np.testing.assert_array_equal(buf.obs["images/front"][:6], batch.obs["images/front"])
    np.testing.assert_array_equal(buf.reward[:6], np.arange(6, dtype=np.float32))


def test_flatten_copies_and_normalises_byte_order():
    obs = {"x": np.arange(3, dtype=">f4")}
    flat = flatten_transition(obs, np.zeros(2, np.float32), 1.0, obs, False, False)
    assert flat["obs/x"].dtype == np.dtype("float32") and flat["obs/x"].dtype.isnative
    np.testing.assert_array_equal(flat["obs/x"], [0, 1, 2])
    obs["x"][0] = 9  # the caller may reuse its buffers
    assert flat["obs/x"][0] == 0


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda t: t["obs"].update(x=[1.0, 2.0]), "obs\\['x'\\] must be a numpy array, got list"),
        (lambda t: t["obs"].update(x=np.array(["a"])), "numeric or bool dtype"),
        (lambda t: t["obs"].update(x=np.array([object()])), "numeric or bool dtype"),
        (lambda t: t.update(action=(0.0, 1.0)), "action must be a numpy array, got tuple"),
        (lambda t: t.update(reward="1"), "reward must be a real number"),
        (lambda t: t.update(terminated=1), "terminated must be a bool"),
        (lambda t: t.update(env_id=-1), "env_id must be an int >= 0"),
        (lambda t: t.update(obs=[1]), "obs must be a mapping"),
    ],
)
def test_bad_values_raise_type_errors(change, match):
    x = np.zeros(2, np.float32)
    t = dict(
        obs={"x": x}, action=x, reward=0.0, next_obs={"x": x}, terminated=False, truncated=False
    )
    change(t)
    with pytest.raises(TypeError, match=match):
        flatten_transition(**t)


def test_schema_mismatches_name_field_expected_and_received():
    x = np.zeros(2, np.float32)
    schema = TransitionSchema.of(flatten_transition({"x": x}, x, 0.0, {"x": x}, False, False))
    with pytest.raises(
        SchemaError,
        match=r"'next_obs/x': expected shape \(2,\) dtype float32, got "
        r"shape \(3,\) dtype float32",
    ):
        y = np.zeros(3, np.float32)
        schema.check(flatten_transition({"x": y}, x, 0.0, {"x": y}, False, False))
    with pytest.raises(SchemaError, match="dtype float64"):
        y = np.zeros(2)
        schema.check(flatten_transition({"x": y}, x, 0.0, {"x": y}, False, False))
    with pytest.raises(SchemaError, match=r"missing \['next_obs/x', 'obs/x'\]"):
        schema.check(flatten_transition({"y": x}, x, 0.0, {"y": x}, False, False))
    with pytest.raises(SchemaError, match="obs and next_obs keys differ"):
        flatten_transition({"x": x}, x, 0.0, {"y": x}, False, False)


def test_decode_rejects_garbage_and_incomplete_batches():
    with pytest.raises(ValueError, match="not a valid safetensors payload"):
        decode_batch(b"\x00" * 3)
    with pytest.raises(ValueError, match="not a valid safetensors payload"):
        decode_batch(b"\xff" * 64)
    with pytest.raises(SchemaError, match="lacks the fields"):
        decode_batch(encode_arrays({"action": np.zeros((2, 1), np.float32)}))
    x = np.zeros(2, np.float32)
    arrays = stack([flatten_transition({"x": x}, x, 0.0, {"x": x}, False, False)] * 3)
    arrays["reward"] = arrays["reward"].astype(np.float64)
    with pytest.raises(SchemaError, match="'reward' must be \\(T,\\) float32"):
        decode_batch(encode_arrays(arrays))
    arrays["reward"] = np.zeros(2, np.float32)
    with pytest.raises(SchemaError, match="one leading length T"):
        decode_batch(encode_arrays(arrays))


def test_state_dict_round_trip_numpy_and_torch():
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(3, 2)
    sd = {**lin.state_dict(), "step": np.array(7, np.int64)}
    out = decode_arrays(encode_arrays(state_dict_arrays(sd)))
    np.testing.assert_array_equal(out["weight"], lin.weight.detach().numpy())
    assert out["step"] == 7 and out["weight"].dtype == np.float32
    with pytest.raises(TypeError, match="state_dict\\['bad'\\] must be a numpy array"):
        state_dict_arrays({"bad": [1, 2]})
