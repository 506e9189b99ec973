"""The kinds of values a setting takes, with Kafka's ranges (its ConfigDef validators).

Each kind converts the text a user wrote and holds the value to its range, so that a bad value is
one line naming what was expected (`expected an integer, got 'abc'`), never Python's own message.
`range_text` is what `raygroups config` shows, in Kafka's documentation style ([1,...], [2,...,10]).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

INT_MAX = 2**31 - 1  # Kafka's INT settings are Java ints
LONG_MAX = 2**63 - 1

_INTEGER = re.compile(r"[+-]?\d+")


@dataclass(frozen=True, slots=True)
class Int:
    """An integer within [low, high] (Java's int or long bounds when open)."""

    low: int | None = None
    high: int | None = None
    long: bool = False
    note: str = ""  # what a special value means, e.g. "-1: no bound"

    def convert(self, text: str) -> int:
        stripped = text.strip()
        if not _INTEGER.fullmatch(stripped):
            raise ValueError(f"expected an integer, got {text!r}")
        value = int(stripped)
        limit = LONG_MAX if self.long else INT_MAX
        if not -limit - 1 <= value <= limit:
            raise ValueError(f"{value} does not fit a Java {'long' if self.long else 'int'}")
        return value

    def check(self, value: int) -> None:
        if self.low is not None and self.high is not None and not self.low <= value <= self.high:
            raise ValueError(f"must be between {self.low} and {self.high}, got {value}")
        if self.low is not None and value < self.low:
            raise ValueError(f"must be at least {self.low}, got {value}")
        if self.high is not None and value > self.high:
            raise ValueError(f"must be at most {self.high}, got {value}")

    @property
    def range_text(self) -> str:
        if self.low is None and self.high is None:
            text = "any integer"
        elif self.high is None:
            text = f"[{self.low},...]"
        elif self.low is None:
            text = f"[...,{self.high}]"
        else:
            text = f"[{self.low},...,{self.high}]"
        return f"{text} ({self.note})" if self.note else text


@dataclass(frozen=True, slots=True)
class Bool:
    def convert(self, text: str) -> bool:
        lowered = text.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise ValueError(f"expected true or false, got {text!r}")

    def check(self, value: bool) -> None:
        pass

    @property
    def range_text(self) -> str:
        return "true, false"


@dataclass(frozen=True, slots=True)
class Choice:
    options: tuple[str, ...]

    def convert(self, text: str) -> str:
        value = text.strip().lower()
        if value not in self.options:
            raise ValueError(f"expected one of {', '.join(self.options)}, got {text!r}")
        return value

    def check(self, value: str) -> None:
        pass

    @property
    def range_text(self) -> str:
        return ", ".join(self.options)


@dataclass(frozen=True, slots=True)
class GatewayCount:
    """auto (one per node on a multi-node cluster, else one), per-node, or a count of at least 1."""

    def convert(self, text: str) -> int | str:
        value = text.strip().lower()
        if value in ("auto", "per-node"):
            return value
        if not _INTEGER.fullmatch(value):
            raise ValueError(f"expected auto, per-node or a positive integer, got {text!r}")
        return int(value)

    def check(self, value: int | str) -> None:
        if isinstance(value, int) and not 1 <= value <= INT_MAX:
            raise ValueError(f"expected auto, per-node or a positive integer, got {value}")

    @property
    def range_text(self) -> str:
        return "auto, per-node, [1,...]"


@dataclass(frozen=True, slots=True)
class Text:
    """Free text, or text another module parses (listeners, PEM files, ...)."""

    convert_text: Callable[[str], Any] = str
    shown: str = ""

    def convert(self, text: str) -> Any:
        return self.convert_text(text)

    def check(self, value: Any) -> None:
        pass

    @property
    def range_text(self) -> str:
        return self.shown


def port(low: int = 0, note: str = "0: a free port") -> Int:
    return Int(low, 65535, note=note)
