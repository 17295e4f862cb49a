"""Inference off the control thread: one worker thread runs one policy job at a time.

:class:`InferenceWorker` is real time (a result is usable as soon as it exists);
:class:`SimulatedTimeWorker` makes a result visible exactly ``D`` control ticks after its
request (fixed, or from the measured compute time at a control rate), waiting for the thread
if needed: simulated time, deterministic, with the same thread and error paths. Used by
:class:`robotrl.async_runner.AsyncChunkRunner`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class InferenceResult:
    """What a worker hands back: the job's value or its exception, and its compute time [s]."""

    value: Any
    error: BaseException | None
    compute_s: float
    submit_tick: int


class InferenceWorker:
    """One daemon thread running one inference job at a time; :meth:`poll` never blocks."""

    def __init__(self, name: str = "chunk-inference") -> None:
        self._cv = threading.Condition()
        self._job: Callable[[], Any] | None = None
        self._result: InferenceResult | None = None
        self._busy = False
        self._closed = False
        self.submit_tick = -1
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """A job was submitted and its result not yet taken by :meth:`poll`."""
        with self._cv:
            return self._busy

    def submit(self, job: Callable[[], Any], tick: int) -> None:
        """Start ``job`` on the worker thread (requested at control tick ``tick``)."""
        with self._cv:
            if self._closed:
                raise RuntimeError("the inference worker is closed")
            if self._busy:
                raise RuntimeError("an inference job is already running")
            self._job, self._busy, self._result, self.submit_tick = job, True, None, tick
            self._cv.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._job is None and not self._closed:
                    self._cv.wait()
                if self._job is None:
                    return
                job, self._job = self._job, None
                tick = self.submit_tick
            start = time.perf_counter()
            try:
                value, error = job(), None
            except Exception as exc:  # the policy's failure is data for the control loop
                value, error = None, exc
            res = InferenceResult(value, error, time.perf_counter() - start, tick)
            with self._cv:
                self._result = res
                self._cv.notify_all()

    def _take(self) -> InferenceResult:
        res, self._result, self._busy = self._result, None, False
        assert res is not None  # callers hold the lock and checked
        return res

    def poll(self, tick: int) -> InferenceResult | None:
        """The finished job's result (taken), or None while running / idle."""
        with self._cv:
            return self._take() if self._result is not None else None

    def wait_result(self, timeout: float | None = None) -> bool:
        """Block until the running job has finished (True) or ``timeout`` [s] passed."""
        with self._cv:
            return self._cv.wait_for(lambda: self._result is not None or not self._busy, timeout)

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the thread (a job not yet started is dropped; a running one finishes first).
        Returns whether the thread ended within ``timeout`` [s]."""
        with self._cv:
            self._closed = True
            self._job = None
            self._cv.notify_all()
        self._thread.join(timeout)
        return not self._thread.is_alive()


class SimulatedTimeWorker(InferenceWorker):
    """Simulated time: a result becomes visible exactly ``D`` ticks after its request.

    ``D = delay_ticks`` if given, else ``max(1, ceil((compute_s + extra_delay_s) * control_hz))``
    from the job's measured compute time. The worker thread is still used; when the simulated
    delay has passed, :meth:`poll` waits for it (the simulation is paused meanwhile).
    """

    def __init__(
        self,
        delay_ticks: int | None = None,
        control_hz: float | None = None,
        extra_delay_s: float = 0.0,
        name: str = "chunk-inference-sim",
    ) -> None:
        if (delay_ticks is None) == (control_hz is None):
            raise ValueError("give exactly one of delay_ticks or control_hz")
        if delay_ticks is not None and delay_ticks < 1:
            raise ValueError(
                f"delay_ticks must be >= 1 (a result is never usable at once), got {delay_ticks}"
            )
        if control_hz is not None and control_hz <= 0:
            raise ValueError(f"control_hz must be > 0, got {control_hz}")
        super().__init__(name)
        self.delay_ticks, self.control_hz, self.extra_delay_s = (
            delay_ticks,
            control_hz,
            extra_delay_s,
        )

    def delay_of(self, res: InferenceResult) -> int:
        """Simulated delay [ticks] of a finished job."""
        if self.delay_ticks is not None:
            return self.delay_ticks
        assert self.control_hz is not None
        return max(1, math.ceil((res.compute_s + self.extra_delay_s) * self.control_hz - 1e-9))

    def poll(self, tick: int) -> InferenceResult | None:
        with self._cv:
            if not self._busy:
                return None
            if self.delay_ticks is not None and tick < self.submit_tick + self.delay_ticks:
                return None
            self._cv.wait_for(lambda: self._result is not None)
            assert self._result is not None
            if tick < self.submit_tick + self.delay_of(self._result):
                return None
            return self._take()
