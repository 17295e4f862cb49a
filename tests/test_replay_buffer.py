"""Replay: n-step targets by hand (termination vs truncation), env streams, ring wrap, mixing,
episode-store round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robotrl.datasets import EpisodeStore
from robotrl.datasets.replay_buffer import MixedReplay, ReplayBuffer

SPEC = {"state/x": ((1,), np.float32), "images/cam": ((2, 2, 3), np.uint8)}


def obs(v: float) -> dict[str, np.ndarray]:
    return {
        "state/x": np.array([v], np.float32),
        "images/cam": np.full((2, 2, 3), v % 256, np.uint8),
    }


def add_episode(buf: ReplayBuffer, first: int, rewards: list[float], end: str, env_id: int = 0):
    """Rows first.. with obs = row, next_obs = row + 1; ``end``: terminated|truncated|running."""
    for t, r in enumerate(rewards):
        last = t == len(rewards) - 1
        buf.add(obs(first + t), np.full(3, first + t, np.float32), r, obs(first + t + 1),
                terminated=last and end == "terminated", truncated=last and end == "truncated",
                env_id=env_id)  # fmt: skip


def test_n_step_targets_by_hand() -> None:
    buf = ReplayBuffer(16, SPEC, 3, n_step=3, gamma=0.5)
    add_episode(buf, 0, [1, 2, 3], "terminated")  # slots 0-2
    add_episode(buf, 10, [4, 5], "truncated")  # slots 3-4
    add_episode(buf, 20, [6, 7], "running")  # slots 5-6
    b = buf.gather(np.arange(7))
    np.testing.assert_allclose(b["reward"], [2.75, 3.5, 3, 6.5, 5, 9.5, 7])
    # terminated: no bootstrap; truncated and running: gamma^m
    np.testing.assert_allclose(b["discount"], [0, 0, 0, 0.25, 0.5, 0.25, 0.5])
    assert b["n"].tolist() == [3, 2, 1, 2, 1, 2, 1]
    assert b["next_obs"]["state/x"][:, 0].tolist() == [3, 3, 3, 12, 12, 22, 22]
    assert b["obs"]["state/x"][:, 0].tolist() == [0, 1, 2, 10, 11, 20, 21]
    assert b["terminated"].tolist() == [True] * 3 + [False] * 4
    one = ReplayBuffer(16, SPEC, 3, n_step=1, gamma=0.5)
    add_episode(one, 0, [1, 2, 3], "terminated")
    b1 = one.gather(np.arange(3))
    np.testing.assert_allclose(b1["reward"], [1, 2, 3])
    np.testing.assert_allclose(b1["discount"], [0.5, 0.5, 0])


def test_interleaved_envs_and_ring_wrap() -> None:
    buf = ReplayBuffer(16, SPEC, 3, n_step=2, gamma=1.0, num_envs=2)
    for t in range(3):  # env 0 rewards 1, env 1 rewards 100, interleaved slot by slot
        buf.add(obs(t), np.zeros(3), 1.0, obs(t + 1), False, t == 2, env_id=0)
        buf.add(obs(50 + t), np.zeros(3), 100.0, obs(51 + t), False, t == 2, env_id=1)
    b = buf.gather(np.arange(6))
    np.testing.assert_allclose(b["reward"], [2, 200, 2, 200, 1, 100])
    assert b["next_obs"]["state/x"][:, 0].tolist() == [2, 52, 3, 53, 3, 53]

    ring = ReplayBuffer(4, SPEC, 3, n_step=3, gamma=1.0)
    add_episode(ring, 0, [1, 2, 3, 4, 5, 6], "running")  # rows 0,1 overwritten by 4,5
    assert len(ring) == 4
    b = ring.gather(np.arange(4))  # slots hold rows 4, 5, 2, 3
    assert b["obs"]["state/x"][:, 0].tolist() == [4, 5, 2, 3]
    np.testing.assert_allclose(b["reward"], [5 + 6, 6, 3 + 4 + 5, 4 + 5 + 6])
    assert b["n"].tolist() == [2, 1, 3, 3]  # the newest row never links to the oldest


def test_mixed_ratio() -> None:
    rng = np.random.default_rng(0)
    online, demo = ReplayBuffer(64, SPEC, 3), ReplayBuffer(64, SPEC, 3)
    add_episode(online, 0, [0.0] * 20, "running")
    add_episode(demo, 100, [1.0] * 20, "terminated")
    for frac, n_demo in ((0.5, 32), (0.25, 16), (0.0, 0), (1.0, 64)):
        b = MixedReplay(online, demo, frac).sample(64, rng)
        assert b["is_demo"].sum() == n_demo
        assert np.array_equal(b["reward"] == 1.0, b["is_demo"])
        assert b["obs"]["images/cam"].shape == (64, 2, 2, 3)
    empty = ReplayBuffer(8, SPEC, 3)
    assert not MixedReplay(online, empty).sample(10, rng)["is_demo"].any()
    with pytest.raises(ValueError):
        MixedReplay(online, demo, 1.5)


def test_store_round_trip(tmp_path: Path) -> None:
    buf = ReplayBuffer(32, SPEC, 3, n_step=3, gamma=0.9, num_envs=2)
    add_episode(buf, 0, [1, 2, 3], "terminated", env_id=0)
    add_episode(buf, 10, [4, 5, 6, 7], "truncated", env_id=1)
    add_episode(buf, 20, [8, 9], "running", env_id=0)
    store = EpisodeStore.create(tmp_path / "rb", fps=20, robot="panda")
    assert buf.save(store) == 3
    assert store.num_episodes == 3 and store.num_steps == 9
    assert store.meta("terminated").tolist() == [True, False, False]
    restored = ReplayBuffer.from_store(store, capacity=32, n_step=3, gamma=0.9)
    assert len(restored) == 9
    a, b = buf.gather(np.arange(9)), restored.gather(np.arange(9))
    for key in ("reward", "discount", "n", "action", "terminated"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    for k in SPEC:
        np.testing.assert_array_equal(a["obs"][k], b["obs"][k])
        np.testing.assert_array_equal(a["next_obs"][k], b["next_obs"][k])


def test_load_drops_unbootstrappable_last_step(tmp_path: Path) -> None:
    store = EpisodeStore.create(tmp_path / "demo", fps=20, robot="panda")
    with store.begin_episode() as w:  # no final_obs given, not terminated
        for t in range(3):
            w.add(obs(t), np.zeros(3, np.float32), reward=float(t))
        w.commit(success=True)
    buf = ReplayBuffer.from_store(store, n_step=1, gamma=0.5)
    assert len(buf) == 2
    b = buf.gather(np.arange(2))
    assert b["next_obs"]["state/x"][:, 0].tolist() == [1, 2]
    assert b["discount"].tolist() == [0.5, 0.5] and not b["terminated"].any()
