"""Roll a policy out for N seeded episodes and report success with a confidence interval."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
from tqdm.auto import tqdm

from policies.tokenizer import LANGUAGE_KEY  # str per env; a tuple of str in a vector env


class EpisodePolicy(Protocol):
    """Anything that acts on one env's observation dict: experts, wrapped BC/RL policies."""

    def reset(self) -> None: ...

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray: ...


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95 % for z = 1.96)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass
class EvalResult:
    """Outcome of :func:`evaluate`; ``success_ci95`` is the Wilson interval."""

    episodes: int
    success_rate: float
    success_ci95: tuple[float, float]
    mean_length: float
    mean_return: float
    successes: list[bool] = field(repr=False)
    lengths: list[int] = field(repr=False)
    instructions: list[str] = field(default_factory=list, repr=False)  # per episode ("" if none)

    @classmethod
    def of(
        cls,
        successes: list[bool],
        lengths: list[int],
        returns: list[float],
        instructions: list[str],
    ) -> EvalResult:
        """The result of these episodes (one entry per episode in each list)."""
        n, n_succ = len(successes), int(np.sum(successes))
        return cls(
            episodes=n,
            success_rate=n_succ / n,
            success_ci95=wilson_interval(n_succ, n),
            mean_length=float(np.mean(lengths)),
            mean_return=float(np.mean(returns)),
            successes=successes,
            lengths=lengths,
            instructions=instructions,
        )

    def by_group(self, group: Callable[[str], str]) -> dict[str, dict[str, Any]]:
        """Success per group of episodes, ``group(instruction) -> name`` (e.g. a task's
        instruction family): ``{name: {episodes, success_rate, success_ci95}}``, sorted."""
        out: dict[str, list[bool]] = {}
        for instruction, ok in zip(self.instructions, self.successes, strict=True):
            out.setdefault(group(instruction), []).append(ok)
        return {
            name: {
                "episodes": len(oks),
                "success_rate": round(float(np.mean(oks)), 4),
                "success_ci95": [round(x, 4) for x in wilson_interval(int(sum(oks)), len(oks))],
            }
            for name, oks in sorted(out.items())
        }

    def summary(self) -> dict[str, Any]:
        d = asdict(self)
        for per_episode in ("successes", "lengths", "instructions"):
            d.pop(per_episode)
        d["success_ci95"] = [round(x, 4) for x in self.success_ci95]
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}


@contextmanager
def seeded_torch(seed: int) -> Iterator[None]:
    """Inside: torch's global generator starts from ``seed`` (a policy's sampling noise);
    after: it is back where the caller had it.

    Every evaluation runs inside it, so the same episodes get the same draws (evaluations of
    one run are compared on common noise) and an evaluation inside a training leaves the
    training's draws alone: evaluating more often or on more envs does not change what is
    trained."""
    import torch  # here: the module serves torch-free callers too

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def evaluate(
    env: Any,
    policy: EpisodePolicy,
    episodes: int,
    *,
    seed: int = 0,
    progress: bool = True,
    desc: str = "eval",
    on_step: Callable[[Any], None] | None = None,
) -> EvalResult:
    """Run ``episodes`` episodes, episode i reset with ``seed + i``.

    Args:
        env: a Gymnasium env (``reset(seed)``, ``step(a)``).
        policy: acts on one observation; ``reset()`` is called at every episode start.
        on_step: called with the env after every step (e.g. to grab video frames).

    The policy's torch draws come from ``seed`` (:func:`seeded_torch`).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    with seeded_torch(seed):
        successes, lengths, returns, instructions = [], [], [], []
        bar = tqdm(range(episodes), desc=desc, disable=not progress, leave=False)
        for i in bar:
            obs, _ = env.reset(seed=seed + i)
            instructions.append(str(obs.get(LANGUAGE_KEY, "")) if isinstance(obs, dict) else "")
            policy.reset()
            done, length, ret, success = False, 0, 0.0, False
            while not done:
                obs, reward, terminated, truncated, info = env.step(policy(obs))
                ret += float(reward)
                length += 1
                success = success or bool(info.get("success", False))
                done = terminated or truncated
                if on_step is not None:
                    on_step(env)
            successes.append(success)
            lengths.append(length)
            returns.append(ret)
            bar.set_postfix(success=f"{np.mean(successes):.2f}")
    return EvalResult.of(successes, lengths, returns, instructions)


def evaluate_vector(
    venv: Any,
    runner: Any,
    episodes: int,
    *,
    seed: int = 0,
    progress: bool = True,
    desc: str = "eval",
    on_step: Callable[[np.ndarray], None] | None = None,
) -> EvalResult:
    """Run ``episodes`` episodes over a Gymnasium vector env (next-step autoreset).

    Env i runs a fixed quota of episodes (``episodes`` split evenly) so that short episodes
    are not over-represented; ``runner`` is a :class:`robotrl.chunk_runner.ChunkRunner` (or
    anything with ``reset(env_ids)`` and ``act(obs_batch) -> (N, Da)``). Seeds: env i starts
    from ``seed + i`` and continues its own generator. ``on_step(stepped)`` is called after
    every step with the (N,) bool mask of the envs whose action was executed (False: the env
    was resetting). The runner's torch draws come from ``seed`` (:func:`seeded_torch`).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    with seeded_torch(seed):
        n = venv.num_envs
        quota = [episodes // n + (1 if i < episodes % n else 0) for i in range(n)]
        obs, _ = venv.reset(seed=seed)
        runner.reset()
        length, ret = np.zeros(n, int), np.zeros(n)
        success, autoreset = np.zeros(n, bool), np.zeros(n, bool)
        done_count = [0] * n
        successes: list[bool] = []
        lengths: list[int] = []
        returns: list[float] = []
        instructions: list[str] = []
        languages = obs.get(LANGUAGE_KEY, [""] * n) if isinstance(obs, dict) else [""] * n
        current = [str(x) for x in languages]  # each env's instruction
        bar = tqdm(total=episodes, desc=desc, disable=not progress, leave=False)
        while len(successes) < episodes:
            obs, reward, terminated, truncated, info = venv.step(runner.act(obs))
            step_success = np.asarray(info.get("success", np.zeros(n, bool)), bool)
            if on_step is not None:
                on_step(~autoreset)
            for i in range(n):
                if autoreset[i]:  # this step reset env i: start its new episode afresh
                    runner.reset([i])
                    if isinstance(obs, dict) and LANGUAGE_KEY in obs:
                        current[i] = str(obs[LANGUAGE_KEY][i])
                    length[i], ret[i], success[i] = 0, 0.0, False
                    continue
                length[i] += 1
                ret[i] += float(reward[i])
                success[i] |= step_success[i]
                if (terminated[i] or truncated[i]) and done_count[i] < quota[i]:
                    done_count[i] += 1
                    successes.append(bool(success[i]))
                    lengths.append(int(length[i]))
                    returns.append(float(ret[i]))
                    instructions.append(current[i])
                    bar.update(1)
                    bar.set_postfix(success=f"{np.mean(successes):.2f}")
            autoreset = np.logical_or(terminated, truncated)
        bar.close()
    return EvalResult.of(successes, lengths, returns, instructions)
