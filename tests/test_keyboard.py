"""KeyboardDevice: key bytes through a pipe / pty, hold-time decay, events, terminal restore."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import sys
import termios
import time

import numpy as np
import pytest

from hardware.devices.device import SPEEDS, DeviceDisconnected
from hardware.devices.keyboard import KEYMAP, KeyboardDevice, help_text, parse_keys


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


def make(pipe, **kw) -> tuple[KeyboardDevice, int, FakeClock]:
    clock = FakeClock()
    dev = KeyboardDevice(pipe[0], clock=clock, speed=1.0, **kw)
    return dev, pipe[1], clock


def test_each_motion_key_drives_its_axis_with_its_sign(pipe) -> None:
    dev, w, clock = make(pipe)
    keys = "wsadrfuoikjl"
    expected = {key: (i // 2, 1 - 2 * (i % 2)) for i, key in enumerate(keys)}
    with dev:
        for key, (axis, sign) in expected.items():
            os.write(w, key.encode())
            cmd = dev.read()
            want = np.zeros(7, dtype=np.float32)
            want[axis], want[6] = sign, -1.0
            np.testing.assert_array_equal(cmd.action, want, err_msg=key)
            assert cmd.intervene and cmd.events == frozenset()
            clock.t += 1.0  # let it decay before the next key


def test_press_holds_for_hold_time_then_decays(pipe) -> None:
    dev, w, clock = make(pipe, hold_time=0.15)
    with dev:
        os.write(w, b"w")
        assert dev.read().action[0] == 1.0
        clock.t += 0.10
        assert dev.read().action[0] == 1.0  # no new bytes, still within the hold time
        clock.t += 0.06
        cmd = dev.read()
        assert cmd.action[0] == 0.0 and not cmd.intervene
        # auto-repeat refreshes the deadline
        os.write(w, b"w")
        dev.read()
        for _ in range(5):
            clock.t += 0.1
            os.write(w, b"w")
            assert dev.read().action[0] == 1.0


def test_opposite_key_wins_and_axes_combine(pipe) -> None:
    dev, w, _ = make(pipe)
    with dev:
        os.write(w, b"wsaj")
        np.testing.assert_array_equal(dev.read().action[:6], [-1, 1, 0, 0, 0, 1])


def test_gripper_toggles_and_persists(pipe) -> None:
    dev, w, clock = make(pipe)
    with dev:
        assert dev.read().action[6] == -1.0
        os.write(w, b" ")
        cmd = dev.read()
        assert cmd.action[6] == 1.0 and cmd.intervene
        clock.t += 5.0
        cmd = dev.read()
        assert cmd.action[6] == 1.0 and not cmd.intervene  # kept, no motion
        np.testing.assert_array_equal(cmd.action[:6], 0.0)
        os.write(w, b" ")
        assert dev.read().action[6] == -1.0
        os.write(w, b" ")
        dev.read()
        dev.reset()
        assert dev.read().action[6] == -1.0


@pytest.mark.parametrize(
    ("keys", "event"),
    [(b"\r", "success"), (b"\n", "success"), (b"\x7f", "failure"), (b"\x08", "failure"),
     (b"x", "rerecord"), (b"q", "quit"), (b"\x1b", "quit"), (b"t", "toggle_intervention")],
)  # fmt: skip
def test_event_keys_fire_once(pipe, keys: bytes, event: str) -> None:
    dev, w, _ = make(pipe)
    with dev:
        os.write(w, keys)
        cmd = dev.read()
        assert cmd.events == frozenset({event})
        assert not cmd.intervene
        np.testing.assert_array_equal(cmd.action[:6], 0.0)
        assert dev.read().events == frozenset()  # one-shot


def test_arrow_keys_and_split_escape_sequence(pipe) -> None:
    dev, w, clock = make(pipe)
    with dev:
        os.write(w, b"\x1b[A")
        cmd = dev.read()
        assert cmd.action[0] == 1.0 and "quit" not in cmd.events
        clock.t += 1
        os.write(w, b"\x1b[")  # the final byte arrives on the next tick
        cmd = dev.read()
        assert cmd.events == frozenset() and not cmd.intervene
        os.write(w, b"D")
        cmd = dev.read()
        assert cmd.action[1] == 1.0 and cmd.events == frozenset()


def test_parse_keys() -> None:
    assert parse_keys("w\x1b[Bq") == (["w", "down", "q"], "")
    assert parse_keys("\x1b[15~a") == (["a"], "")  # F5 dropped
    assert parse_keys("\x1b") == (["\x1b"], "")
    assert parse_keys("a\x1b[1;") == (["a"], "\x1b[1;")


def test_speed_keys_scale_motion(pipe) -> None:
    dev, w, _ = make(pipe)
    with dev:
        os.write(w, b"-w")
        assert dev.read().action[0] == pytest.approx(SPEEDS[-2])
        os.write(w, b"------w")
        assert dev.read().action[0] == pytest.approx(SPEEDS[0])
        os.write(w, b"+=w")
        assert dev.read().action[0] == pytest.approx(SPEEDS[2])


def test_uppercase_and_custom_keymap(pipe) -> None:
    dev, w, _ = make(pipe, keymap={"z": "+z", "p": "success"})
    with dev:
        os.write(w, b"Zw")  # w is unbound in this map
        cmd = dev.read()
        np.testing.assert_array_equal(cmd.action[:6], [0, 0, 1, 0, 0, 0])
        os.write(w, b"p")
        assert dev.read().events == {"success"}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown commands"):
        KeyboardDevice(0, keymap={"w": "+w"})
    with pytest.raises(ValueError, match="hold_time"):
        KeyboardDevice(0, hold_time=0)
    with pytest.raises(ValueError, match="speed"):
        KeyboardDevice(0, speed=1.5)


def test_end_of_stream_is_a_sticky_disconnect(pipe) -> None:
    dev, w, _ = make(pipe)
    with dev:
        os.write(w, b"w")
        os.close(w)
        with pytest.raises(DeviceDisconnected, match="closed"):
            dev.read()  # w's motion is never returned once the stream is gone
        with pytest.raises(DeviceDisconnected):
            dev.read()


def test_read_requires_start_and_stop_is_idempotent(pipe) -> None:
    dev, _, _ = make(pipe)
    with pytest.raises(RuntimeError, match="not started"):
        dev.read()
    dev.stop()
    dev.start()
    dev.stop()
    dev.stop()


def test_pty_cbreak_and_restore() -> None:
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        dev = KeyboardDevice(slave, clock=FakeClock())
        with dev:
            mode = termios.tcgetattr(slave)
            assert not mode[3] & termios.ICANON and not mode[3] & termios.ECHO
            assert mode[3] & termios.ISIG  # Ctrl-C still interrupts
            os.write(master, b"w")  # no newline needed: not line-buffered
            assert dev.read().action[0] > 0
        assert termios.tcgetattr(slave) == before
        dev.stop()
        assert termios.tcgetattr(slave) == before
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_pty_restored_on_exception(exc: type[BaseException]) -> None:
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        with pytest.raises(exc), KeyboardDevice(slave):
            assert termios.tcgetattr(slave) != before
            raise exc
        assert termios.tcgetattr(slave) == before
    finally:
        os.close(master)
        os.close(slave)


def test_help_text_lists_every_command() -> None:
    text = help_text()
    for command in set(KEYMAP.values()):
        assert command in text
    assert "space" in text and "enter" in text


CHILD = """
import signal, sys, termios, time
from hardware.devices.keyboard import KeyboardDevice
# a test runner started in the background (shell '&') passes SIGINT on as ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
before = termios.tcgetattr(0)
try:
    with KeyboardDevice() as dev:  # stdin, the pty's slave side
        print("ready", flush=True)
        while True:
            cmd = dev.read()
            if cmd.intervene:
                print("x=%.2f" % cmd.action[0], flush=True)
            time.sleep(0.01)
except KeyboardInterrupt:
    print("restored" if termios.tcgetattr(0) == before else "NOT restored", flush=True)
"""


def test_ctrl_c_in_a_real_terminal_session_restores_it() -> None:
    """A child process on a pty reads stdin; Ctrl-C (SIGINT via ISIG) still restores the tty."""
    master, slave = pty.openpty()

    def controlling_tty() -> None:  # so the pty's Ctrl-C reaches the child as SIGINT
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=slave,
        stdout=slave,
        stderr=subprocess.PIPE,
        preexec_fn=controlling_tty,
    )
    os.close(slave)
    out = b""

    def wait_for(token: bytes) -> None:
        nonlocal out
        deadline = time.monotonic() + 20.0  # by time: a chatty child fills many reads fast
        while time.monotonic() < deadline:
            if token in out:
                return
            if select.select([master], [], [], 0.05)[0]:
                out += os.read(master, 1024)
        raise AssertionError(f"no {token!r} in {out!r}")

    try:
        wait_for(b"ready")
        os.write(master, b"w")
        wait_for(b"x=0.50")
        os.write(master, b"\x03")
        wait_for(b"restored")
        assert b"NOT restored" not in out
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        os.close(master)
