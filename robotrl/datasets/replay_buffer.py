"""RL replay: a preallocated numpy ring buffer of transitions with n-step returns, and an
RLPD-style mix of an online buffer and a demo buffer.

Shape letters: B batch, C capacity, Da action dim. A transition is
``(obs, action, reward, next_obs, terminated, truncated)`` with ``obs``/``next_obs`` dicts of
arrays. Transitions of each env stream are linked in order, so several envs may add
interleaved (``env_id``) and n-step targets never cross an episode boundary:

    R = sum_{j<m} gamma^j r_{t+j},   discount = gamma^m * (1 - terminated_{t+m-1})

where m <= n stops at the first terminated/truncated transition (or the newest one of a
running episode). The target is ``R + discount * Q(next_obs_{t+m-1})``: bootstrap on
truncation, not on termination.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from robotrl.datasets.episode_store import EpisodeStore

NO_LINK = -1


class ReplayBuffer:
    """Ring buffer of C transitions; memory is allocated once in the constructor.

    Args:
        capacity: C, transitions kept (oldest overwritten first).
        obs_spec: ``{key: (shape, dtype)}`` of one observation, e.g.
            ``{"state/ee_pos": ((3,), np.float32), "images/front": ((128, 128, 3), np.uint8)}``.
        action_dim: Da.
        n_step: n of the n-step return (1 = plain TD).
        gamma: discount per step.
        num_envs: env streams that may add interleaved transitions.
    """

    def __init__(
        self,
        capacity: int,
        obs_spec: Mapping[str, tuple[tuple[int, ...], Any]],
        action_dim: int,
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        num_envs: int = 1,
    ) -> None:
        if capacity < 1 or n_step < 1 or not 0.0 <= gamma <= 1.0 or num_envs < 1:
            raise ValueError(
                f"need capacity >= 1, n_step >= 1, 0 <= gamma <= 1, num_envs >= 1; got "
                f"{capacity=}, {n_step=}, {gamma=}, {num_envs=}"
            )
        self.capacity, self.n_step, self.gamma = capacity, n_step, gamma
        self.obs_spec = {k: (tuple(s), np.dtype(d)) for k, (s, d) in obs_spec.items()}
        self.obs = {k: np.zeros((capacity, *s), d) for k, (s, d) in self.obs_spec.items()}
        self.next_obs = {k: np.zeros((capacity, *s), d) for k, (s, d) in self.obs_spec.items()}
        self.action = np.zeros((capacity, action_dim), np.float32)
        self.reward = np.zeros(capacity, np.float32)
        self.terminated = np.zeros(capacity, bool)
        self.truncated = np.zeros(capacity, bool)
        self.seq = np.full(capacity, -1, np.int64)  # insertion counter of each slot
        self.next_slot = np.full(capacity, NO_LINK, np.int64)  # successor in the same episode
        self.next_seq = np.full(capacity, -1, np.int64)  # its seq when linked (stale check)
        self._last_slot = np.full(num_envs, NO_LINK, np.int64)  # per env: previous slot if open
        self._count = 0

    def __len__(self) -> int:
        return min(self._count, self.capacity)

    def add(
        self,
        obs: Mapping[str, ArrayLike],
        action: np.ndarray,
        reward: float,
        next_obs: Mapping[str, ArrayLike],
        terminated: bool,
        truncated: bool,
        env_id: int = 0,
    ) -> None:
        """Store one transition of env ``env_id`` (copies the arrays; an entry of one
        element may be a scalar)."""
        i = self._count % self.capacity
        for k in self.obs_spec:
            self.obs[k][i] = obs[k]
            self.next_obs[k][i] = next_obs[k]
        self.action[i] = action
        self.reward[i] = reward
        self.terminated[i], self.truncated[i] = terminated, truncated
        self.seq[i] = self._count
        self.next_slot[i] = NO_LINK
        prev = self._last_slot[env_id]
        if prev != NO_LINK:
            self.next_slot[prev], self.next_seq[prev] = i, self._count
        self._last_slot[env_id] = NO_LINK if (terminated or truncated) else i
        self._count += 1

    def _successor(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(next slot, valid) of each slot: same episode, not yet overwritten."""
        nxt = self.next_slot[slots]
        valid = (nxt != NO_LINK) & ~self.terminated[slots] & ~self.truncated[slots]
        valid &= self.seq[np.where(valid, nxt, 0)] == self.next_seq[slots]
        return nxt, valid

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, Any]:
        """Uniform batch with n-step targets.

        Returns numpy arrays: ``obs`` {key: (B, ...)}, ``action`` (B, Da), ``reward`` (B,) the
        n-step return R, ``next_obs`` {key: (B, ...)} the state to bootstrap from,
        ``discount`` (B,) gamma^m * (1 - terminated), ``terminated`` (B,), ``n`` (B,) = m.
        """
        if len(self) == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return self.gather(rng.integers(0, len(self), size=batch_size))

    def gather(self, slots: np.ndarray) -> dict[str, Any]:
        """The batch of :meth:`sample` for given slots (B,) int."""
        slots = np.asarray(slots, np.int64)
        last = slots.copy()
        ret = self.reward[slots].astype(np.float64)
        disc = np.full(len(slots), self.gamma)
        m = np.ones(len(slots), np.int64)
        alive = np.ones(len(slots), bool)
        for _ in range(1, self.n_step):
            nxt, valid = self._successor(last)
            alive &= valid
            last = np.where(alive, nxt, last)
            ret += np.where(alive, disc * self.reward[last], 0.0)
            disc = np.where(alive, disc * self.gamma, disc)
            m += alive
        terminated = self.terminated[last]
        return {
            "obs": {k: v[slots] for k, v in self.obs.items()},
            "action": self.action[slots],
            "reward": ret.astype(np.float32),
            "next_obs": {k: v[last] for k, v in self.next_obs.items()},
            # bootstrap on truncation, not on termination
            "discount": np.where(terminated, 0.0, disc).astype(np.float32),
            "terminated": terminated,
            "n": m,
        }

    # ------------------------------------------------------------------ episode store I/O
    def save(self, store: EpisodeStore, *, task: str = "", operator: str = "replay") -> int:
        """Write the buffered transitions to ``store`` as episodes (each env stream's linked
        run of transitions; a still-running episode is saved as truncated). Returns the number
        of episodes written."""
        n = len(self)
        slots = np.argsort(self.seq[:n])
        nxt, valid = self._successor(slots)
        has_pred = np.zeros(self.capacity, bool)
        has_pred[nxt[valid]] = True
        written = 0
        for head in slots[~has_pred[slots]]:
            chain = [int(head)]
            while True:
                succ, ok = self._successor(np.array([chain[-1]]))
                if not ok[0]:
                    break
                chain.append(int(succ[0]))
            last = chain[-1]
            with store.begin_episode(task=task, operator=operator) as w:
                for t, s in enumerate(chain):
                    obs = {k: v[s] for k, v in self.obs.items()}
                    w.add(
                        obs, self.action[s], reward=float(self.reward[s]), timestamp=t / store.fps
                    )
                w.commit(
                    success=bool(self.terminated[last]),
                    terminated=bool(self.terminated[last]),
                    final_obs={k: v[last] for k, v in self.next_obs.items()},
                )
            written += 1
        return written

    def load(self, store: EpisodeStore, episode_mask: np.ndarray | None = None) -> int:
        """Add the episodes of ``store`` as transitions (next_obs from the following row, the
        last from ``final_obs``). A non-terminated episode without a valid final observation
        loses its last transition (nothing to bootstrap from). Returns transitions added."""
        mask = np.ones(store.num_episodes, bool) if episode_mask is None else episode_mask
        added = 0
        for e in np.flatnonzero(mask):
            sl = store.episode_slice(int(e))
            obs = {k: store.get(k, sl) for k in self.obs_spec}
            final = {k: store.meta("final_obs." + k)[e] for k in self.obs_spec}
            action, reward = store.get("action", sl), store.get("reward", sl)
            terminated = bool(store.meta("terminated")[e])
            length = sl.stop - sl.start
            if not terminated and not store.meta("final_obs_valid")[e]:
                length -= 1
            for t in range(length):
                end = t == length - 1
                nxt = (
                    final if t == sl.stop - sl.start - 1 else {k: v[t + 1] for k, v in obs.items()}
                )
                self.add(
                    {k: v[t] for k, v in obs.items()},
                    action[t],
                    float(reward[t]),
                    nxt,
                    terminated=end and terminated,
                    truncated=end and not terminated,
                )
                added += 1
        return added

    @classmethod
    def from_store(
        cls, store: EpisodeStore, capacity: int | None = None, obs_keys: list[str] | None = None,
        **kwargs: Any,
    ) -> ReplayBuffer:  # fmt: skip
        """A buffer shaped like ``store``'s observations, filled with its episodes (e.g. the
        demo buffer). ``capacity`` defaults to the store's step count."""
        keys = obs_keys or [v["key"] for v in store.attrs["keys"].values() if v.get("obs")]
        spec = {k: (store.array(k).shape[1:], store.array(k).dtype) for k in keys}
        action_dim = store.array("action").shape[1]
        buf = cls(max(1, capacity or store.num_steps), spec, action_dim, **kwargs)
        buf.load(store)
        return buf


class MixedReplay:
    """Batches mixing an online buffer and a demo buffer at a fixed ratio (RLPD: 50/50).

    Args:
        online, demo: the two buffers (same obs keys and action dim).
        demo_fraction: share of each batch drawn from ``demo`` (all online if it is empty).
    """

    def __init__(self, online: ReplayBuffer, demo: ReplayBuffer, demo_fraction: float = 0.5):
        if not 0.0 <= demo_fraction <= 1.0:
            raise ValueError(f"demo_fraction must be in [0, 1], got {demo_fraction}")
        if set(online.obs_spec) != set(demo.obs_spec):
            raise ValueError(f"obs keys differ: {set(online.obs_spec)} vs {set(demo.obs_spec)}")
        self.online, self.demo, self.demo_fraction = online, demo, demo_fraction

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, Any]:
        """Batch of :meth:`ReplayBuffer.sample` plus ``is_demo`` (B,) bool; exactly
        ``round(B * demo_fraction)`` rows come from the demo buffer."""
        n_demo = round(batch_size * self.demo_fraction) if len(self.demo) else 0
        if len(self.online) == 0:
            n_demo = batch_size
        parts = []
        if batch_size - n_demo:
            parts.append(self.online.sample(batch_size - n_demo, rng))
        if n_demo:
            parts.append(self.demo.sample(n_demo, rng))
        out = concat_batches(parts)
        out["is_demo"] = np.arange(batch_size) >= batch_size - n_demo
        return out


def concat_batches(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One batch of several sampled batches (nested ``obs`` dicts too), in order."""
    out: dict[str, Any] = {}
    for key, value in parts[0].items():
        if isinstance(value, dict):
            out[key] = {k: np.concatenate([p[key][k] for p in parts]) for k in value}
        else:
            out[key] = np.concatenate([p[key] for p in parts])
    return out
