"""Waiting on a condition another thread or process makes true (no fixed sleeps in tests)."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(pred: Callable[[], object], timeout: float = 60.0, every: float = 0.002) -> bool:
    """True as soon as ``pred()`` is; False if it is not within ``timeout`` s. The bound only
    ends a test that is broken: a correct run is never limited by it, however loaded the
    machine, so its outcome does not depend on the clock."""
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            return False
        time.sleep(every)
    return True
