"""The stream of fuzzed frames: every advertised (API, version) in turn, each frame valid, with a
structured fault (generate.py), or broken byte-wise: truncated, bits flipped, junk after the
body, a huge or negative length written over random bytes."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from tests.fuzz.generate import FAULTS, Encoder, every_api_version

KINDS = ("valid", "fault", "truncate", "bitflip", "junk", "overwrite")
_OVERWRITES = (b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff", b"\x00\x00", b"\xff" * 8)


@dataclass(frozen=True, slots=True)
class Frame:
    api_key: int
    api_version: int
    kind: str  # one of KINDS, "fault:<name>" for structured faults
    data: bytes  # with its size prefix


def frames(seed: int, count: int, apis: set[int] | None = None, names: tuple[bytes, ...] = ()) -> Iterator[Frame]:
    rng = random.Random(seed)
    versions = every_api_version(apis)
    for i in range(count):
        api_key, version = versions[i % len(versions)]
        kind = rng.choice(KINDS)
        fault = rng.choice(FAULTS) if kind == "fault" else None
        body = Encoder(rng, fault, names=names).request(api_key, version, correlation_id=i & 0x7FFFFFFF)
        body = _mutate(rng, kind, body)
        yield Frame(api_key, version, f"fault:{fault}" if fault else kind, struct.pack(">i", len(body)) + body)


def _mutate(rng: random.Random, kind: str, body: bytes) -> bytes:
    if kind == "truncate":
        return body[: rng.randrange(len(body))]
    if kind == "junk":
        return body + rng.randbytes(rng.randint(1, 32))
    if kind == "bitflip":
        data = bytearray(body)
        # The api key and version are left alone most of the time, so the body parser is reached.
        start = 0 if rng.random() < 0.05 else 4
        for _ in range(rng.randint(1, 8)):
            if len(data) > start:
                data[rng.randrange(start, len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == "overwrite":
        data = bytearray(body)
        pattern = rng.choice(_OVERWRITES)
        at = rng.randrange(8, max(9, len(data)))
        data[at : at + len(pattern)] = pattern
        return bytes(data)
    return body
