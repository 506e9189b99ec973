"""Feeding fuzzed frames to a KafkaConnection in-process and sorting what came back."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field, fields, is_dataclass

from kio.serial._introspect import get_field_tag, is_optional

from cluster.gateway.answers import build_response
from cluster.gateway.connection import Close, KafkaConnection, Reply, Request
from tests.fuzz.frames import Frame

_CLOSE_CATEGORIES = (
    ("non-nullable", "close: null in a non-nullable field"),
    ("tried to allocate", "close: array longer than the frame"),
    ("bytes left", "close: length past the end"),
    ("runs past the end", "close: length past the end"),
    ("varint", "close: bad varint"),
    ("negative", "close: negative length"),
    ("tag", "close: bad tag"),
    ("not supported", "close: unsupported api/version"),
    ("shorter than a request header", "close: shorter than a header"),
    ("socket.request.max.bytes", "close: size prefix"),
)


def close_category(reason: str) -> str:
    for needle, category in _CLOSE_CATEGORIES:
        if needle in reason:
            return category
    return "close: kio refused the body"


@dataclass
class Tally:
    frames: int = 0
    seconds: float = 0.0
    slowest: float = 0.0
    outcomes: collections.Counter = field(default_factory=collections.Counter)
    by_kind: collections.Counter = field(default_factory=collections.Counter)
    failures: list[str] = field(default_factory=list)  # each a property that did not hold

    def add(self, frame: Frame, outcome: str, elapsed: float) -> None:
        self.frames += 1
        self.seconds += elapsed
        self.slowest = max(self.slowest, elapsed)
        self.outcomes[outcome] += 1
        self.by_kind[(frame.kind, "request" if outcome == "reply" else "close")] += 1


def nulls_in_non_nullable(entity: object, path: str = "") -> list[str]:
    """Fields a handler would receive as None although the schema says they cannot be."""
    found = []
    for f in fields(entity):
        value = getattr(entity, f.name)
        where = f"{path}{f.name}"
        if value is None:
            if get_field_tag(f) is None and not is_optional(f):
                found.append(where)
        elif is_dataclass(value):
            found += nulls_in_non_nullable(value, where + ".")
        elif isinstance(value, tuple):
            for item in value:
                if is_dataclass(item):
                    found += nulls_in_non_nullable(item, where + "[].")
    return found


def feed(frame: Frame, tally: Tally) -> None:
    """One frame on a fresh connection: it must give exactly one Request (answered with a default
    response, which must come back as a Reply) or one Close; nothing may escape."""
    started = time.perf_counter()
    try:
        conn = KafkaConnection()
        events = conn.receive(frame.data)
        if len(events) != 1:
            raise AssertionError(f"{len(events)} events for one frame")
        (event,) = events
        if isinstance(event, Close):
            outcome = close_category(event.reason)
        else:
            assert isinstance(event, Request)
            if event.body is not None:
                nulls = nulls_in_non_nullable(event.body)
                if nulls:
                    raise AssertionError(f"null reached the handler in {nulls}")
            conn.respond(event, build_response(event.api_key, event.api_version if event.body is not None else 0, {}))
            out = conn.next_events()
            if not (len(out) == 1 and isinstance(out[0], Reply) and out[0].data):
                raise AssertionError(f"no reply: {out}")
            outcome = "reply"
    except BaseException as exc:  # MemoryError included: any escape is a finding
        outcome = "ESCAPED"
        tally.failures.append(f"api {frame.api_key} v{frame.api_version} {frame.kind}: {type(exc).__name__}: {exc} "
                              f"frame={frame.data[:64].hex()}")
    tally.add(frame, outcome, time.perf_counter() - started)
