"""A warning that a client can trigger at will, logged at a bounded rate.

At most `per_second` lines per second; the first line after a quiet spell says how many were left
out, so a flood of bad frames costs a few lines and still shows its size.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RateLimitedLog:
    def __init__(self, log: logging.Logger, per_second: int = 3, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._per_second = per_second
        self._clock = clock
        self._window = -1.0
        self._in_window = 0
        self.suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        self._emit(logging.WARNING, message, args)

    def info(self, message: str, *args: object) -> None:
        self._emit(logging.INFO, message, args)

    def _emit(self, level: int, message: str, args: tuple) -> None:
        now = self._clock()
        if now - self._window >= 1.0:
            self._window = now
            self._in_window = 0
        if self._in_window >= self._per_second:
            self.suppressed += 1
            return
        self._in_window += 1
        if self.suppressed:
            self._log.log(level, message + " (%d similar lines suppressed)", *args, self.suppressed)
            self.suppressed = 0
        else:
            self._log.log(level, message, *args)
