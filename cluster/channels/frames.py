"""The channel's frames: a call is [size][call id][method][arguments], an answer [size][call id]
[status][result], the size an unsigned 32-bit count of the bytes after it.

Arguments and results are one pickle each: C pickle, or cloudpickle (what Ray would have used) for
what C pickle refuses. Hand-written because it is three fields; the Kafka codec (kio) is for
Kafka's schemas, msgspec for schemas of our own, and these payloads are the Python values Ray
carried before.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

CALL = struct.Struct(">IQH")  # size, call id, method name length
ANSWER = struct.Struct(">IQB")  # size, call id, status
SIZE = struct.Struct(">I")
OK, RAISED = 0, 1
CANCEL = ""  # the method of a frame that cancels the call of its id
# One frame may carry a batch of many calls' records (a produce of megabytes): far above those,
# a size this large is a corrupt stream, not a frame.
MAX_FRAME = 1 << 30


def dumps(value: Any) -> bytes:
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        from ray import cloudpickle  # what Ray pickles with: closures, local classes

        return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def call_frame(call_id: int, method: str, args: tuple, kwargs: dict[str, Any]) -> bytes:
    name = method.encode()
    body = dumps((args, kwargs))
    return CALL.pack(CALL.size - SIZE.size + len(name) + len(body), call_id, len(name)) + name + body


def parse_call(frame: bytes) -> tuple[int, str, tuple, dict[str, Any]]:
    """A call frame without its size: (call id, method, args, kwargs)."""
    call_id, name_len = struct.unpack_from(">QH", frame, 0)
    start = 10
    method = frame[start:start + name_len].decode()
    args, kwargs = pickle.loads(frame[start + name_len:])
    return call_id, method, args, kwargs


def answer_frame(call_id: int, status: int, value: Any) -> bytes:
    body = dumps(value)
    return ANSWER.pack(ANSWER.size - SIZE.size + len(body), call_id, status) + body


def parse_answer(frame: bytes) -> tuple[int, int, Any]:
    """An answer frame without its size: (call id, status, value)."""
    call_id, status = struct.unpack_from(">QB", frame, 0)
    return call_id, status, pickle.loads(frame[9:])


class FrameBuffer:
    """Bytes as they arrive in, whole frames (without their size) out: sans-I/O, like h11's buffer."""

    def __init__(self) -> None:
        self._data = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._data += data
        frames = []
        view, at = self._data, 0
        while len(view) - at >= SIZE.size:
            (size,) = SIZE.unpack_from(view, at)
            if size > MAX_FRAME:
                raise ValueError(f"a channel frame of {size} bytes: the stream is corrupt")
            if len(view) - at - SIZE.size < size:
                break
            frames.append(bytes(view[at + SIZE.size:at + SIZE.size + size]))
            at += SIZE.size + size
        if at:
            del self._data[:at]
        return frames
