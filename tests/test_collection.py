"""Collection sessions: devices drive the env, finished episodes are durable, the operator's
events label / re-record / quit, and nothing but the current episode is ever lost."""

import io
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import sim
from hardware.devices import DeviceDisconnected, ExpertDevice, KeyboardDevice, ScriptedDevice
from hardware.devices.device import TeleopCommand
from robotrl.collection import CollectionSession, open_or_create_store
from robotrl.datasets import EpisodeStore, verify


def _session(tmp_path, device, env=None, **kw):
    env = env or sim.make("reach")
    store = open_or_create_store(str(tmp_path / "s.zarr"), fps=20.0, robot="panda_sim")
    kw.setdefault("realtime", False)
    return CollectionSession(env, device, store, task="reach", status=None, **kw), store


def _replay(task, seed, n_steps, keys):
    """What a fresh env + expert produce for one seed: the ground truth of an episode."""
    env = sim.make(task)
    expert = sim.make_expert(task, env)
    obs, _ = env.reset(seed=seed)
    expert.reset()
    rows = {k: [] for k in keys}
    for _ in range(n_steps):
        action = expert(obs)
        for k in keys:
            rows[k].append(action if k == "action" else obs[k])
        obs, *_ = env.step(action)
    return {k: np.stack(v) for k, v in rows.items()}


def test_expert_session_records_successful_episodes_exactly(tmp_path):
    env = sim.make("reach")
    session, store = _session(tmp_path, ExpertDevice(sim.make_expert("reach", env)), env)
    stats = session.run(3)
    assert (stats.recorded, stats.successes, stats.stopped_by) == (3, 3, "done")
    assert store.num_episodes == 3
    ep = store.episode(1)
    truth = _replay("reach", 1, len(ep["action"]), ["state/ee_pos", "state/goal_pos", "action"])
    for k, v in truth.items():
        np.testing.assert_array_equal(ep[k], v)
    assert ep["success"] and ep["intervention"].all()
    store.close()
    assert verify(tmp_path / "s.zarr")["ok"]


def test_operator_events_label_rerecord_and_quit(tmp_path):
    move = np.zeros(7, np.float32)
    move[0] = 0.2
    cmds = [
        TeleopCommand(move, True),
        TeleopCommand(move, True, frozenset({"rerecord"})),  # drop episode 0's first try
        TeleopCommand(move, True),
        TeleopCommand(move, True, frozenset({"failure"})),  # episode 0: 2 steps, failed
        TeleopCommand(move, True, frozenset({"success"})),  # episode 1: 1 step, success
        TeleopCommand(move, True),
        TeleopCommand(move, True, frozenset({"quit"})),  # episode 2 dropped, session ends
    ]
    session, store = _session(tmp_path, ScriptedDevice(cmds))
    stats = session.run(10)
    assert (stats.recorded, stats.discarded, stats.stopped_by) == (2, 2, "quit")
    np.testing.assert_array_equal(store.episode_lengths, [2, 1])
    np.testing.assert_array_equal(store.meta("success"), [False, True])
    store.close()


class _Failing(ScriptedDevice):
    def __init__(self, after, exc):
        super().__init__([np.zeros(7, np.float32)] * 1000)
        self.after, self.exc, self.n = after, exc, 0

    def _read(self):
        self.n += 1
        if self.n > self.after:
            raise self.exc
        return super()._read()


@pytest.mark.parametrize(
    "exc, reason", [(KeyboardInterrupt(), "interrupt"), (DeviceDisconnected("unplugged"), "lost")]
)
def test_interrupt_or_lost_device_keeps_finished_episodes(tmp_path, exc, reason):
    env = sim.make("reach", max_episode_steps=5)
    session, store = _session(tmp_path, _Failing(12, exc), env)
    stats = session.run(10)
    assert reason in stats.stopped_by
    assert store.num_episodes == 2  # steps 1-10 made two 5-step episodes; the third is dropped
    store.close()
    report = verify(tmp_path / "s.zarr")
    assert report["ok"] and report["clean"]


def test_realtime_pacing_sleeps_to_the_control_period(tmp_path):
    now = [0.0]
    sleeps = []

    def sleep(dt):
        sleeps.append(dt)
        now[0] += dt

    env = sim.make("reach", max_episode_steps=4)
    session, store = _session(
        tmp_path,
        ScriptedDevice([np.zeros(7, np.float32)] * 10),
        env,
        realtime=True,
        clock=lambda: now[0],
        sleep=sleep,
    )
    session.run(1)
    assert sleeps and all(dt == pytest.approx(0.05) for dt in sleeps)
    store.close()


def test_keyboard_through_a_pipe_drives_and_labels(tmp_path):
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"wwww\r")  # +x for a while, then Enter: success
    env = sim.make("reach")
    session, store = _session(tmp_path, KeyboardDevice(stream=read_fd), env)
    stats = session.run(1)
    os.close(write_fd)
    os.close(read_fd)
    ep = store.episode(0)
    assert stats.recorded == 1 and bool(ep["success"])
    assert ep["action"][0, 0] > 0 and ep["intervention"][0]
    store.close()


def test_store_of_another_rate_is_refused(tmp_path):
    EpisodeStore.create(tmp_path / "s.zarr", fps=10.0, robot="panda_sim").close()
    with pytest.raises(ValueError, match=r"10\.0 Hz"):
        open_or_create_store(str(tmp_path / "s.zarr"), fps=20.0, robot="panda_sim")


def test_a_file_as_out_is_refused_in_one_line(tmp_path):
    (tmp_path / "README.md").write_text("not a store")
    with pytest.raises(ValueError, match=r"README\.md is a file; give a directory"):
        open_or_create_store(str(tmp_path / "README.md"), fps=20.0, robot="panda_sim")


def test_status_line_is_one_line_per_episode_in_logs(tmp_path):
    env = sim.make("reach", max_episode_steps=3)
    out = io.StringIO()
    store = open_or_create_store(str(tmp_path / "s.zarr"), fps=20.0, robot="panda_sim")
    CollectionSession(
        env, ScriptedDevice([np.zeros(7, np.float32)] * 9), store, realtime=False, status=out
    ).run(2)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[-1].startswith("episode 2/2") and "recorded 2" in lines[-1]
    store.close()


@pytest.mark.slow
def test_sigkill_during_collection_loses_only_the_current_episode(tmp_path):
    """Kill `robotrl collect` with SIGKILL at random moments, restart it each time (appending),
    then check the store opens cleanly and every committed episode is exactly what the
    deterministic env + expert produce for its seed."""
    out = tmp_path / "kill.zarr"
    rng = np.random.default_rng(0)
    cmd = [
        sys.executable,
        "-m",
        "robotrl.cli",
        "collect",
        "task=reach",
        "device=expert",
        "episodes=1000",
        f"out={out}",
        "viewer=off",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def committed() -> int:
        try:
            with EpisodeStore.open(out) as s:
                return s.num_episodes
        except Exception:  # not created yet, or mid-creation
            return 0

    for _ in range(5):
        before = committed()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        # Wait (the machine may be loaded) until this run has committed an episode, then kill
        # at a random moment: mid-episode or mid-commit.
        deadline = time.monotonic() + 180
        while committed() <= before and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.1)
        time.sleep(rng.uniform(0.0, 1.5))
        p.send_signal(signal.SIGKILL)
        p.wait()
    report = verify(out)
    assert report["ok"], report
    store = EpisodeStore.open(out, mode="a")  # append-open repairs leftovers of the kill
    n = store.num_episodes
    assert n >= 5
    keys = ["state/ee_pos", "state/joint_pos", "state/goal_pos", "action"]
    for i in range(n):
        ep = store.episode(i, keys=keys)
        truth = _replay("reach", i, len(ep["action"]), keys)
        for k in keys:
            np.testing.assert_array_equal(ep[k], truth[k], err_msg=f"episode {i} {k}")
    store.close()
    assert verify(out)["clean"]


def test_instructed_env_stores_each_episodes_instruction(tmp_path):
    env = sim.make("pick_color")
    path = str(tmp_path / "pc.zarr")
    obs_keys = list(env.observation_space.spaces)
    assert "language" in obs_keys
    store = open_or_create_store(path, fps=20.0, robot="panda_sim", obs_keys=obs_keys)
    session = CollectionSession(
        env,
        ExpertDevice(sim.make_expert("pick_color", env)),
        store,
        task="pick_color",
        language="ignored: the env names the instruction",
        realtime=False,
        status=None,
    )
    stats = session.run(3)
    assert stats.successes == 3
    expected = [env.reset(seed=s)[1]["language"] for s in range(3)]
    assert store.meta("language").tolist() == expected
    assert "language" not in store.keys  # metadata, not a per-step array
    store.close()
    # Appending with the same env's observation keys (language included) is accepted.
    open_or_create_store(path, fps=20.0, robot="panda_sim", obs_keys=obs_keys).close()
    assert verify(tmp_path / "pc.zarr")["ok"]
