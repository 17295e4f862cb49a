"""Split residual RL on the toy PointGoal task, with the learner and the actor each SIGKILLed and
restarted once mid-run.

The base is :class:`toy.BiasedPointBase` (~13 % success); in one process the residual lifts
it past 90 % in ~2000 env steps (tests/test_residual_training.py). Here the actor (env + base +
residual actor) is a process of its own and the learner (replay + updates) a Ray actor, in a
Ray cluster of two nodes started as on two machines (``ray start --head``, then ``ray start
--address``)::

    python tests/residual_demo.py run [--total-steps 3000 --hz 100 ...]

1. learner and actor start; the actor is SIGKILLed at ``kill_actor_at`` env steps and a new
   actor process (same id, new epoch) continues the budget;
2. once the learner has published weights and the run has reached ``kill_learner_at`` env
   steps, the learner's process is SIGKILLed; Ray restarts it and it resumes from its last
   checkpoint (its replay is lost);
3. the second actor finishes, flushes, and the learner is stopped.

The learner joins at the head's ``host:port``; the actors join with ``address="auto"``, as a
process on a machine that ran ``ray start --address`` does.

One JSON line reports the evaluated success curve (env steps, time, weights version, connected),
the transport counters, and the accounting of the surviving actor: ``sent == delivered +
dropped + rejected`` with ``delivered`` the unique (actor, epoch, seq) batches the learners
logged before acknowledging them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from toy import RESIDUAL_SETTINGS, STATE_STATS, BiasedPointBase, PointGoal

from robotrl.algos.residual import ResidualAgent, ResidualConfig, StateFeaturizer
from robotrl.algos.residual_actor import run_actor
from robotrl.algos.residual_learner import ResidualLearner
from robotrl.algos.residual_rollout import ResidualRollout
from robotrl.algos.residual_split import RoleProcess
from robotrl.algos.residual_training import TrainConfig, evaluate_residual
from robotrl.distributed.learner_service import serve_learner

EXECUTE_HORIZON = 1
SETTLE_S = 120.0  # the last evaluation waits for the learner's owed updates (a loaded CPU lags)


def toy_train(total_steps: int, seed: int = 0, eval_every: int = 250) -> TrainConfig:
    return TrainConfig(
        total_steps=total_steps,
        warmup_steps=300,
        critic_warmup_updates=200,
        eval_every=eval_every,
        eval_episodes=30,
        seed=seed,
    )


def _featurizer() -> StateFeaturizer:
    return StateFeaturizer(["state/pos", "state/goal"], STATE_STATS)


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def learner_main(address: str, state_dir: Path, deliveries: Path, seed: int = 0) -> None:
    """Learner driver: run the learner as a restartable Ray actor in the cluster at
    ``address`` until SIGTERM, resuming from ``state_dir``; every delivered batch is logged to
    ``deliveries`` (before its ack) as ``actor epoch seq n``. Prints a ``ready`` line (with the
    learner actor's pid) each time a (re)started learner answers."""
    import ray
    import toy

    from robotrl.distributed.cluster import connect

    ray.cloudpickle.register_pickle_by_value(toy)  # Ray's workers do not see tests/

    def make_learner() -> ResidualLearner:
        torch.set_num_threads(1)
        agent = ResidualAgent(_featurizer().dim, 2, ResidualConfig(**RESIDUAL_SETTINGS), seed=seed)
        return ResidualLearner(agent, toy_train(0, seed))

    def delivered(batch: Any) -> None:
        with open(deliveries, "a") as log:
            log.write(f"{batch.actor_id} {batch.epoch} {batch.seq} {len(batch)}\n")

    connect(address)  # before our handler: joining Ray installs its own SIGTERM handler
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    out = serve_learner(
        make_learner,
        name="demo-learner",
        address=address,
        state_dir=state_dir,
        stop=stop,
        publish_every_updates=50,
        publish_every_s=0.5,
        checkpoint_every_s=0.0,  # at every publish: a restart loses at most one period
        on_ready=lambda info: _emit(event="ready", **info),
        on_delivery=delivered,
        poll_s=0.1,
    )
    _emit(event="exit", **out)


def actor_main(
    address: str, total_steps: int, step_offset: int, hz: float, seed: int, outbox_batches: int
) -> None:
    """Actor process: act until ``total_steps`` (``step_offset`` done before), report JSON."""
    from robotrl.distributed import ActorClient
    from robotrl.distributed.cluster import connect

    torch.set_num_threads(1)
    joined = connect(address)
    base, feat = BiasedPointBase(), _featurizer()
    agent = ResidualAgent(feat.dim, 2, ResidualConfig(**RESIDUAL_SETTINGS), seed=seed)
    train = toy_train(total_steps, seed)
    rollout = ResidualRollout(
        base, PointGoal, feat, execute_horizon=EXECUTE_HORIZON, seed=seed * 7919
    )

    def evaluate(a: ResidualAgent) -> dict[str, float]:
        ev = evaluate_residual(
            a, base, feat, PointGoal, train.eval_episodes, train.eval_seed, EXECUTE_HORIZON
        )
        return {"success_rate": ev["success_rate"]}

    client = ActorClient(
        "robot0",
        "demo-learner",
        address=address,
        batch_size=16,
        outbox_batches=outbox_batches,
        max_in_flight=4,
        ack_timeout=2.0,
        peer_timeout=1.0,
    )
    _emit(event="start", epoch=client.epoch, pid=os.getpid(), cluster=joined)
    try:
        out = run_actor(
            client,
            rollout,
            agent,
            train,
            actor_hz=hz,
            evaluate=evaluate,
            step_offset=step_offset,
            on_progress=lambda row: _emit(**row),
            settle_s=SETTLE_S,
        )
    finally:
        client.close()
        rollout.close()
    _emit(event="done", epoch=client.epoch, **out)


def _read_deliveries(path: Path) -> tuple[dict[tuple[str, str, str], int], int]:
    """Unique (actor, epoch, seq) -> n, and the number of redelivered batches."""
    unique: dict[tuple[str, str, str], int] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        actor_id, epoch, seq, n = line.split()
        unique[(actor_id, epoch, seq)] = int(n)
    return unique, len(lines) - len(unique)


def run(
    address: str | None = None,
    total_steps: int = 3000,
    hz: float = 50.0,
    kill_actor_at: int = 400,
    kill_learner_at: int = 700,
    outbox_batches: int = 8,
    seed: int = 0,
    timeout: float = 600.0,
    port: int = 6391,
    actor_address: str | None = None,
) -> dict[str, Any]:
    """The demonstration (see the module docstring) in the Ray cluster at ``address`` (None:
    start a two-node one on this machine, as a GPU box and a robot PC would, and let the
    actors find it with ``"auto"``); its summary."""
    if address is None:
        from ray_learner import two_node_cluster

        with two_node_cluster(port) as addr:
            return run(addr, total_steps, hz, kill_actor_at, kill_learner_at, outbox_batches,
                       seed, timeout, actor_address="auto")  # fmt: skip
    py = [sys.executable, __file__]
    env_address = ["--address", address]
    actor_env_address = ["--address", actor_address or address]
    with tempfile.TemporaryDirectory() as tmp:
        state, log = Path(tmp) / "learner", Path(tmp) / "deliveries.txt"
        learner_cmd = [*py, "learner", *env_address, "--state-dir", str(state)]
        learner = RoleProcess([*learner_cmd, "--deliveries", str(log)], "learner")
        actors: list[RoleProcess] = []
        try:
            ready = learner.wait_for(lambda m: m.get("event") == "ready", 300)

            def start_actor(offset: int, s: int) -> RoleProcess:
                a = RoleProcess(
                    [
                        *py, "actor", *actor_env_address, "--total-steps", str(total_steps),
                        "--step-offset", str(offset), "--hz", str(hz), "--seed", str(s),
                        "--outbox-batches", str(outbox_batches),
                    ],
                    f"actor{len(actors)}",
                )  # fmt: skip
                actors.append(a)
                return a

            t0 = time.time()
            a1 = start_actor(0, seed)
            a1.wait_for(lambda m: m.get("env_steps", 0) >= kill_actor_at, timeout)
            a1.kill()
            killed_actor = [m for m in a1.lines if "sent" in m][-1]
            a1_epoch = a1.lines[0]["epoch"]
            actor_killed_t = time.time() - t0
            a2 = start_actor(killed_actor["env_steps"], seed + 1)
            a2.wait_for(
                lambda m: m.get("env_steps", 0) >= kill_learner_at and m.get("version", -1) > 0,
                timeout,
            )
            # SIGKILL the learner's process: no checkpoint, no goodbye; Ray restarts it
            os.kill(int(ready["pid"]), signal.SIGKILL)
            learner_killed_t = time.time() - t0
            ready2 = learner.wait_for(lambda m: m.get("event") == "ready" and m["restarted"], 300)
            learner_restarted_t = time.time() - t0
            done = a2.wait_for(lambda m: m.get("event") == "done", timeout)
        finally:
            for a in actors:
                if a.proc.poll() is None:
                    a.kill()
            learner.stop(120)
        learner_exit = learner.last
        unique, redelivered = _read_deliveries(log)
    a2_epoch = str(a2.lines[0]["epoch"])
    delivered = {
        e: sum(n for (_, ep, _), n in unique.items() if ep == e) for e in (str(a1_epoch), a2_epoch)
    }
    curve = [
        {k: m[k] for k in ("env_steps", "success_rate", "version", "connected")}
        | {"actor": i + 1, "t": round(m["wall"] - t0, 2)}
        for i, a in enumerate(actors)
        for m in a.lines
        if m.get("event") == "eval"
    ]
    before = [c for c in curve if c["t"] <= learner_killed_t]
    after = [c for c in curve if c["t"] > learner_restarted_t]
    return {
        "task": "point_goal (sim.toy), BiasedPointBase bias (0.5, -0.5)",
        "learner_address": address,
        "actor_address": actor_address or address,
        "actor_clusters": [a.lines[0]["cluster"] for a in actors],
        "total_steps": total_steps,
        "actor_hz": hz,
        "base_success": curve[0]["success_rate"],
        "success_before_learner_kill": before[-1]["success_rate"] if before else None,
        "first_success_after_restart": after[0]["success_rate"] if after else None,
        "final_success": done["evaluations"][-1]["success_rate"],
        "best_success": max(c["success_rate"] for c in curve),
        "curve": curve,
        "actor_killed_at": {"t": round(actor_killed_t, 2), "env_steps": killed_actor["env_steps"]},
        "learner_killed_at": {"t": round(learner_killed_t, 2)},
        "learner_restarted_at": {"t": round(learner_restarted_t, 2)},
        "learner_down_s": round(learner_restarted_t - learner_killed_t, 2),
        "learner_pids": [ready["pid"], ready2["pid"]],
        "resumed_version": learner_exit.get("resumed_version"),
        "final_version": learner_exit.get("version"),
        "learner_exit": learner_exit,
        "surviving_actor": {
            k: done[k]
            for k in (
                "sent",
                "acked",
                "dropped",
                "rejected",
                "resent",
                "reconnects",
                "flushed",
                "weights_version",
                "step_ms_median",
                "step_ms_max",
                "env_steps",
                "settled",
            )
        },
        "surviving_actor_delivered": delivered[a2_epoch],
        "accounting_exact": done["sent"]
        == delivered[a2_epoch] + done["dropped"] + done["rejected"],
        "killed_actor": {
            "sent_at_last_report": killed_actor["sent"],
            "acked_at_last_report": killed_actor["acked"],
            "delivered": delivered[str(a1_epoch)],
        },
        "redelivered_batches": redelivered,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="role", required=True)
    lp = sub.add_parser("learner")
    lp.add_argument("--address", required=True)
    lp.add_argument("--state-dir", type=Path, required=True)
    lp.add_argument("--deliveries", type=Path, required=True)
    ap = sub.add_parser("actor")
    ap.add_argument("--address", required=True)
    ap.add_argument("--total-steps", type=int, default=3000)
    ap.add_argument("--step-offset", type=int, default=0)
    ap.add_argument("--hz", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--outbox-batches", type=int, default=8)
    rp = sub.add_parser("run")
    rp.add_argument("--address", default=None, help="a Ray cluster (default: start two nodes)")
    rp.add_argument("--total-steps", type=int, default=3000)
    rp.add_argument("--hz", type=float, default=50.0)
    rp.add_argument("--kill-actor-at", type=int, default=400)
    rp.add_argument("--kill-learner-at", type=int, default=700)
    rp.add_argument("--outbox-batches", type=int, default=8)
    a = p.parse_args(argv)
    if a.role == "learner":
        learner_main(a.address, a.state_dir, a.deliveries)
    elif a.role == "actor":
        actor_main(a.address, a.total_steps, a.step_offset, a.hz, a.seed, a.outbox_batches)
    else:
        _emit(
            **run(a.address, a.total_steps, a.hz, a.kill_actor_at, a.kill_learner_at,
                  a.outbox_batches)
        )  # fmt: skip


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
