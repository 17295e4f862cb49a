"""A clock the test advances, for code that paces itself with ``clock_ns()`` and ``wait(s)``.

:class:`SteppedClock` lets the code under test run as fast as it can while its time stands
still, and makes its ``wait(s)`` return only once the test has let time pass that far: the test
calls :meth:`SteppedClock.run_until` and, when it returns, the code has done everything it does
up to that moment and is parked in a wait. Outcomes do not depend on machine load.
"""

from __future__ import annotations

import math
import threading


class SteppedClock:
    """Monotonic time in integer nanoseconds, released by the test."""

    def __init__(self) -> None:
        self._now = 0  # [ns]
        self._limit = 0  # [ns] the code may advance time up to here
        self._parked = False
        self._closed = False
        self._cond = threading.Condition()

    def ns(self) -> int:
        """Now [ns] (``clock_ns`` of the code under test)."""
        with self._cond:
            return self._now

    def wait(self, seconds: float) -> bool:
        """``wait`` of the code under test: returns once time has reached now + ``seconds``
        (rounded up to the next ns, at least 1 ns: a wait always lets some time pass, so a loop
        waiting for a deadline it computed in floats cannot spin), or at once with True after
        :meth:`close`."""
        with self._cond:
            target = self._now + max(1, math.ceil(seconds * 1e9))
            while self._limit < target and not self._closed:
                self._now = max(self._now, self._limit)
                self._parked = True
                self._cond.notify_all()
                self._cond.wait()
            self._parked = False
            if self._closed:
                return True
            self._now = target
            return False

    def run_until(self, seconds: float, timeout: float = 60.0) -> None:
        """Let time run to ``seconds`` and return once the code has reached it and is parked
        in a wait (``timeout``: real seconds before giving up)."""
        with self._cond:
            self._limit = round(seconds * 1e9)
            self._parked = False
            self._cond.notify_all()
            ok = self._cond.wait_for(
                lambda: self._closed or (self._parked and self._now >= self._limit), timeout
            )
        if not ok:
            raise AssertionError(f"the code did not reach t = {seconds} s")

    def close(self) -> None:
        """Release every wait for good (the code under test is stopping)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
