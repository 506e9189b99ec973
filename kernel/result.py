"""What an operation returns: records to append, a response, and answers to parked requests.

Kafka's CoordinatorResult, plus the one thing a pure classic-group coordinator needs that Kafka
keeps as futures inside its group objects: a JoinGroup or SyncGroup that must wait is *parked*
under the request's token (`response=PARKED`), and a later operation answers it by listing
`(token, response)` in `completions`. The runtime owns the futures; the domain only keeps tokens,
so it stays free of I/O and a test reads every answer as data.

Timers are data too (`timers`: kernel.timer's Schedule and Cancel, in order): the runtime arms them
only once the records are durable, so a failed write leaves no timer behind, and a test asserts
the session a Heartbeat re-arms like any other answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

R = TypeVar("R")


class _Parked:
    _instance: "_Parked | None" = None

    def __new__(cls) -> "_Parked":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "PARKED"

    def __reduce__(self) -> str:
        return "PARKED"


PARKED: Any = _Parked()

RequestToken = int


@dataclass(slots=True)
class Result(Generic[R]):
    records: list[Any] = field(default_factory=list)
    response: R | None = None
    completions: list[tuple[RequestToken, Any]] = field(default_factory=list)
    timers: list[Any] = field(default_factory=list)  # kernel.timer.TimerChange, applied in order

    @staticmethod
    def of(response: R) -> "Result[R]":
        return Result(records=[], response=response)
