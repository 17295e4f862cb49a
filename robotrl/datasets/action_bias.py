"""Deliberately imperfect demonstrations: a copy of a store with a constant bias on every
recorded action (a miscalibrated teleop device, an offset camera extrinsic...). BC on it gives
the systematically-off base policies that residual RL and flow policy gradients then correct."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from robotrl.datasets.episode_store import EpisodeStore, EpisodeStoreError
from robotrl.datasets.integrity import intact_episodes


def copy_with_action_bias(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], bias: Sequence[float]
) -> EpisodeStore:
    """Write ``dst``: every episode of ``src`` with ``clip(action + bias, -1, 1)``.

    Observations, rewards, labels and metadata are copied unchanged. Returns ``dst`` opened
    for append (close it when done).
    """
    with EpisodeStore.open(src) as store:
        intact_episodes(store)  # never copy damaged data into a fresh, checksummed store
        b = np.asarray(bias, np.float32)
        if b.shape != store.array("action").shape[1:]:
            raise EpisodeStoreError(
                f"bias must have shape {store.array('action').shape[1:]}, got {b.shape}"
            )
        out = EpisodeStore.create(
            dst,
            fps=store.fps,
            robot=store.attrs.get("robot", ""),
            action_space=store.attrs.get("action_space"),
            attrs={"action_bias": b.tolist(), "biased_from": str(src)},
        )
        obs_keys = [k for k in store.keys if k.startswith(("state/", "images/"))]
        for ep in store.episodes():
            with out.begin_episode(
                operator=str(ep["operator"]), task=str(ep["task"]), language=str(ep["language"])
            ) as w:
                for t in range(len(ep["action"])):
                    w.add(
                        {k: ep[k][t] for k in obs_keys},
                        np.clip(ep["action"][t] + b, -1.0, 1.0),
                        {"intervention": bool(ep["intervention"][t])},
                        reward=float(ep["reward"][t]),
                        timestamp=float(ep["timestamp"][t]),
                    )
                final = ep["final_obs"] if ep["final_obs_valid"] else None
                w.commit(
                    success=bool(ep["success"]), terminated=bool(ep["terminated"]), final_obs=final
                )
    return out
