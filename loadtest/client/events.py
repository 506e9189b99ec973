"""What light members report about each request: its kind, latency and outcome."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from loadtest.client.connection import ConnectionClosed

EventSink = Callable[[str, float, ErrorCode], None]


async def timed(sink: EventSink | None, kind: str, call: Awaitable[Any]) -> Any:
    """Await a request and tell `sink` (kind, milliseconds, error code); a lost connection is
    reported as NETWORK_EXCEPTION and raised."""
    started = time.perf_counter()
    try:
        response = await call
    except ConnectionClosed:
        if sink is not None:
            sink(kind, (time.perf_counter() - started) * 1000, ErrorCode.network_exception)
        raise
    if sink is not None:
        sink(kind, (time.perf_counter() - started) * 1000, getattr(response, "error_code", ErrorCode.none))
    return response
