"""A Ctrl-C at a chosen point of a run, without a clock: SIGINT once metrics.csv has a row."""

import os
import signal

import pytest

from robotrl.metrics import MetricsLogger


def interrupt_at_row(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Send this process a SIGINT, as a Ctrl-C in its terminal does, right after a run's
    metrics.csv gets its n-th row."""
    real = MetricsLogger.log
    rows = []

    def log(self, **row):
        real(self, **row)
        rows.append(row)
        if len(rows) == n:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(MetricsLogger, "log", log)
