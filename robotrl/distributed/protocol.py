"""The actor/learner wire protocol over ZeroMQ: message kinds, framing, addresses, sockets.

One TCP (or ipc) endpoint: the learner binds a ROUTER socket, each actor connects a DEALER.
A message is a ZeroMQ multipart message ``[header, payload?]``: ``header`` is a small JSON
object ``{"p": PROTOCOL, "k": kind, ...}``, ``payload`` raw safetensors bytes.

actor -> learner (every header has ``a`` actor id, ``e`` epoch, ``f`` floor, ``w`` weights held):
    hello                 first contact on a fresh socket; answered by ``welcome``
    ping                  heartbeat every ``heartbeat_interval``; answered by ``pong``
    batch  s=seq n=T      + payload: T stacked transitions; answered by ``ack`` once the learner
                          has handed them to its algorithm (or by ``nack`` if it never will)
    bye                   clean shutdown
learner -> actor (every header has ``l`` the learner session):
    welcome / pong        liveness; ``v`` current weights version
    ack    s=[seq...]     delivered (or already delivered: duplicates are re-acknowledged)
    nack   s=seq r=reason rejected for good (schema mismatch, stale epoch); the actor counts it
    weights v=version     + payload: the state dict; ``t`` publish time (monotonic clock)

``epoch`` is the actor process's incarnation (its start time in ns): (actor id, epoch, seq) names
a batch uniquely, so a restarted actor never collides with its predecessor. ``floor`` is the
oldest seq still in the actor's outbox: every batch below it is acknowledged or counted as
dropped, which lets the learner forget its de-duplication state below it.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import zmq

PROTOCOL = 1
HELLO, PING, BATCH, BYE = "hello", "ping", "batch", "bye"
WELCOME, PONG, ACK, NACK, WEIGHTS = "welcome", "pong", "ack", "nack", "weights"
ACTOR_KINDS = frozenset({HELLO, PING, BATCH, BYE})
LEARNER_KINDS = frozenset({WELCOME, PONG, ACK, NACK, WEIGHTS})
MAX_MESSAGE_BYTES = 1 << 30  # a message larger than this is refused by ZeroMQ itself
_ACTOR_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_TCP = re.compile(r"tcp://(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.\-]+|\*):(?P<port>\*|\d+)")
_ANY_INTERFACE = {"*", "0.0.0.0", "[::]"}


class ProtocolError(ValueError):
    """A message that is not a well-formed message of this protocol."""


def pack(kind: str, payload: bytes | None = None, **fields: Any) -> list[bytes]:
    """Frames of one message: JSON header (``kind`` + ``fields``) and the optional payload."""
    header = json.dumps({"p": PROTOCOL, "k": kind, **fields}, separators=(",", ":")).encode()
    return [header] if payload is None else [header, payload]


def unpack(frames: list[bytes], kinds: frozenset[str]) -> tuple[dict[str, Any], bytes | None]:
    """(header, payload or None) of a message whose kind must be in ``kinds``.

    Raises:
        ProtocolError: not 1-2 frames, header not a JSON object, other protocol version,
            unknown kind.
    """
    if not 1 <= len(frames) <= 2:
        raise ProtocolError(f"expected 1 or 2 frames, got {len(frames)}")
    try:
        header = json.loads(frames[0])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"header is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise ProtocolError(f"header must be a JSON object, got {type(header).__name__}")
    if header.get("p") != PROTOCOL:
        raise ProtocolError(f"protocol version {header.get('p')!r}, this side speaks {PROTOCOL}")
    if header.get("k") not in kinds:
        raise ProtocolError(f"unexpected message kind {header.get('k')!r}")
    return header, (frames[1] if len(frames) == 2 else None)


def check_actor_id(actor_id: str) -> str:
    """``actor_id`` if it is 1-64 characters of ``[A-Za-z0-9_.-]``; ValueError otherwise."""
    if not isinstance(actor_id, str) or not _ACTOR_ID.fullmatch(actor_id):
        raise ValueError(f"actor_id must be 1-64 characters of [A-Za-z0-9_.-], got {actor_id!r}")
    return actor_id


def check_address(address: str, *, bind: bool, allow_any_interface: bool = False) -> str:
    """``address`` if it is ``tcp://host:port`` or ``ipc://path``; ValueError otherwise.

    The learner binds exactly the configured interface: binding all interfaces (``*``,
    ``0.0.0.0``, ``[::]``) exposes an unauthenticated port and needs ``allow_any_interface``.
    Port ``*`` or ``0`` (an ephemeral port) is only meaningful when binding.
    """
    if address.startswith("ipc://") and len(address) > len("ipc://"):
        return address
    m = _TCP.fullmatch(address)
    if m is None:
        raise ValueError(
            f"address must look like tcp://127.0.0.1:5555 or ipc:///path, got {address!r}"
        )
    host, port = m["host"], m["port"]
    if host in _ANY_INTERFACE and not (bind and allow_any_interface):
        raise ValueError(
            f"{address!r} names every interface; give the interface to use (e.g. 127.0.0.1)"
            + (" or pass allow_any_interface=True" if bind else "")
        )
    if port in ("*", "0"):
        if not bind:
            raise ValueError(f"an actor must connect to a concrete port, got {address!r}")
        return f"tcp://{host}:*"
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"port must be in 1..65535, got {port}")
    return address


def configure(sock: zmq.Socket, *, heartbeat_interval: float, peer_timeout: float) -> None:
    """Options shared by both ends: no linger at close, ZMTP heartbeats so a dead TCP peer is
    noticed by ZeroMQ too, fast reconnects (ZeroMQ retries the connect by itself)."""
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
    sock.setsockopt(zmq.HEARTBEAT_IVL, max(1, int(heartbeat_interval * 1000)))
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, max(1, int(peer_timeout * 1000)))
    sock.setsockopt(zmq.HEARTBEAT_TTL, max(100, int(peer_timeout * 1000)))
    sock.setsockopt(zmq.RECONNECT_IVL, 50)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, 200)


def send(sock: zmq.Socket, frames: list[bytes]) -> bool:
    """Send without ever blocking; False if ZeroMQ cannot take the message now (no connected
    peer, full queue, unroutable) — the callers keep the data and retry."""
    try:
        sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=len(frames[-1]) < 65536)
    except zmq.Again:
        return False
    except zmq.ZMQError as e:
        if e.errno == zmq.EHOSTUNREACH:  # ROUTER_MANDATORY: that actor is not connected now
            return False
        raise
    return True


class Wakeup:
    """A self-pipe that other threads write to so an I/O thread's ``zmq.Poller`` returns at once
    (ZeroMQ sockets must stay in the thread that owns them)."""

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)

    def fileno(self) -> int:
        return self._r

    def set(self) -> None:
        try:
            os.write(self._w, b"x")
        except (BlockingIOError, OSError):  # full pipe: already awake; closed: shutting down
            pass

    def drain(self) -> None:
        try:
            while os.read(self._r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
