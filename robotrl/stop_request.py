"""A request to stop a long job early and keep what it has: the first Ctrl-C (SIGINT) or
SIGTERM sets an event the job's loop polls; a second Ctrl-C quits at once (KeyboardInterrupt).

A training command wraps its loop in :func:`stop_request`; the loop ends at its next step once
the event is set, and the command saves its checkpoint as after a full run. Worker processes
of the vector envs ignore SIGINT (``sim.vector_env``), so a Ctrl-C in the terminal, which
reaches the whole process group, stops the job through its main process only.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

# the exit code of a command that stopped on request (a shell's code for SIGINT)
INTERRUPTED = 130
# what an RL run stopped early saves (every learner keeps its agent as KeptAgent does)
KEEPS_BEST = (
    "the checkpoint keeps the agent of its best evaluation so far (keep_best=false: the last)"
)


@contextmanager
def stop_request(notice: str = "") -> Iterator[threading.Event]:
    """An event set by the first SIGINT or SIGTERM within the block.

    Args:
        notice: printed on stderr at the first signal (what the job does now); "" prints
            nothing.

    Inside the block a second SIGINT raises KeyboardInterrupt where the main thread is. Off
    the main thread (where Python cannot install handlers) the event is returned and never
    set by a signal. The previous handlers come back when the block ends.
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        if not stop.is_set() and notice:
            print(notice, file=sys.stderr, flush=True)
        stop.set()

    old = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def stop_notice(command: str, keeps: str) -> str:
    """The line a training command prints at the first Ctrl-C: ``keeps`` says what it saves."""
    return f"{command}: stopping at the next step; {keeps}. Ctrl-C again quits without saving"


def stop_summary(interrupted: bool) -> dict[str, bool | int]:
    """The summary keys of a job that honours a stop request: ``interrupted``, and the exit
    code :data:`INTERRUPTED` when it stopped early."""
    return {"interrupted": interrupted, **({"exit_code": INTERRUPTED} if interrupted else {})}
