"""A tqdm bar that records what a training loop shows: the steps it advanced by and the
phases of its postfix. Patch it over a module's ``tqdm`` and read ``RecordingBar.last``."""

from __future__ import annotations

import io
from typing import Any

from tqdm.std import tqdm


class RecordingBar(tqdm):
    last: RecordingBar | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(disable=False, file=io.StringIO())  # drawn, but not on the terminal
        super().__init__(*args, **kwargs)
        self.steps: list[int] = []
        self.phases: list[str] = []
        RecordingBar.last = self

    def update(self, n: float | None = 1) -> bool | None:
        self.steps.append(int(n or 0))
        return super().update(n)

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        phase = {**(ordered_dict or {}), **kwargs}.get("phase")
        if phase is not None and (not self.phases or self.phases[-1] != phase):
            self.phases.append(str(phase))
        super().set_postfix(ordered_dict, refresh=refresh, **kwargs)
