"""share.auto.offset.reset: where a share group starts on a partition it never consumed.

Kafka's values: `latest` (the default), `earliest`, or `by_duration:<ISO-8601 duration>` (the
first record whose timestamp is at most that long ago, e.g. `by_duration:PT1H`). The
partition's leader resolves it against its log when the durable start offset is -1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class OffsetReset:
    strategy: str  # "latest", "earliest" or "by_duration"
    duration_ms: int = 0

    @staticmethod
    def parse(text: str) -> "OffsetReset":
        value = text.strip()
        lowered = value.lower()
        if lowered in ("latest", "earliest"):
            return OffsetReset(lowered)
        prefix = "by_duration:"
        if lowered.startswith(prefix):
            return OffsetReset("by_duration", parse_iso_duration_ms(value[len(prefix):]))
        raise ValueError(f"expected latest, earliest or by_duration:<ISO-8601 duration>, got {text!r}")

    def __str__(self) -> str:
        if self.strategy != "by_duration":
            return self.strategy
        return f"by_duration:PT{self.duration_ms / 1000:g}S"


def parse_iso_duration_ms(text: str) -> int:
    match = _DURATION.match(text.strip())
    if not match or text.strip().upper() in ("P", "PT"):
        raise ValueError(f"{text!r} is not an ISO-8601 duration such as PT1H or P1DT12H")
    days, hours, minutes = (int(match[g] or 0) for g in ("d", "h", "m"))
    seconds = float(match["s"] or 0)
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)
