"""Wire protocol framing, address and id validation, the wake-up pipe."""

from __future__ import annotations

import json
import select

import pytest

pytest.importorskip("zmq", reason="robotrl.distributed needs the 'dist' extra (pyzmq)")

from robotrl.distributed import protocol as P


def test_pack_unpack_round_trip():
    frames = P.pack(P.BATCH, b"\x00\x01", a="robot0", e=5, s=3, n=2, f=0, w=None)
    header, payload = P.unpack(frames, P.ACTOR_KINDS)
    assert header == {
        "p": P.PROTOCOL,
        "k": "batch",
        "a": "robot0",
        "e": 5,
        "s": 3,
        "n": 2,
        "f": 0,
        "w": None,
    }
    assert payload == b"\x00\x01"
    assert P.unpack(P.pack(P.PONG, l="s", v=1), P.LEARNER_KINDS)[1] is None


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        ([], "expected 1 or 2 frames"),
        ([b"a", b"b", b"c"], "expected 1 or 2 frames"),
        ([b"\xff\xfe"], "header is not JSON"),
        ([b"[1, 2]"], "must be a JSON object"),
        ([json.dumps({"p": 99, "k": "ping"}).encode()], "protocol version 99"),
        ([json.dumps({"p": P.PROTOCOL, "k": "pong"}).encode()], "unexpected message kind"),
    ],
)
def test_malformed_messages_raise_protocol_error(frames, match):
    with pytest.raises(P.ProtocolError, match=match):
        P.unpack(frames, P.ACTOR_KINDS)


def test_addresses():
    assert P.check_address("tcp://127.0.0.1:5555", bind=False) == "tcp://127.0.0.1:5555"
    assert P.check_address("tcp://127.0.0.1:0", bind=True) == "tcp://127.0.0.1:*"
    assert P.check_address("tcp://gpu-box.lan:7000", bind=False) == "tcp://gpu-box.lan:7000"
    assert P.check_address("ipc:///tmp/robotrl.sock", bind=True) == "ipc:///tmp/robotrl.sock"
    with pytest.raises(ValueError, match="names every interface"):
        P.check_address("tcp://0.0.0.0:5555", bind=True)
    assert P.check_address("tcp://*:5555", bind=True, allow_any_interface=True)
    with pytest.raises(ValueError, match="concrete port"):
        P.check_address("tcp://127.0.0.1:*", bind=False)
    for bad in ("127.0.0.1:5555", "udp://127.0.0.1:1", "tcp://127.0.0.1", "tcp://h:70000"):
        with pytest.raises(ValueError):
            P.check_address(bad, bind=True)


def test_actor_ids():
    assert P.check_actor_id("franka-1.left_arm") == "franka-1.left_arm"
    for bad in ("", "a b", "x" * 65, "ü"):
        with pytest.raises(ValueError, match="actor_id must be"):
            P.check_actor_id(bad)


def test_wakeup_pipe_never_blocks():
    w = P.Wakeup()
    for _ in range(100_000):  # far more than a pipe buffer: set() must not block
        w.set()
    assert select.select([w.fileno()], [], [], 0)[0]
    w.drain()
    assert not select.select([w.fileno()], [], [], 0)[0]
    w.close()
    w.set()  # after close: ignored
