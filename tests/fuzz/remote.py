"""Fuzzed frames against a running gateway over several connections: each frame is sent on its
own turn of a connection and gets an answer, a close, or no answer in time (a long poll, or a
Produce with acks=0); the last two start a fresh connection."""

from __future__ import annotations

import collections
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Iterator

from cluster.gateway.apis import ApiKey
from tests.fuzz.frames import Frame

# Strings in frames sent to a live cluster: topic and group names a fuzz may create or touch.
NAMES = (b"", b"fuzz", b"fuzz-a", b"fuzz-b", b"t", b"g")
# APIs a live cluster is spared. CreateTopics/CreatePartitions with a random count were partition
# bombs; the partition limits (issue 10) answer them POLICY_VIOLATION now, so none is left out.
BOMBS: set[ApiKey] = set()


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


class _Link:
    def __init__(self, address: tuple[str, int], timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self.sock: socket.socket | None = None

    def exchange(self, frame: Frame) -> str:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=10)
            self.sock.settimeout(self.timeout)
        try:
            self.sock.sendall(frame.data)
            head = _read_exactly(self.sock, 4)
            if head is None:
                return self._drop("close")
            (size,) = struct.unpack(">i", head)
            if _read_exactly(self.sock, size) is None:
                return self._drop("close")
            return "reply"
        except socket.timeout:
            return self._drop("no answer in time")
        except (ConnectionResetError, BrokenPipeError):
            return self._drop("close")

    def _drop(self, outcome: str) -> str:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        return outcome


def run_remote(
    bootstrap: str,
    frames: Iterable[Frame],
    connections: int = 8,
    answer_timeout: float = 1.0,
    on_frame: Callable[[str], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> collections.Counter:
    """Send every frame; count outcomes. A refused connection (the gateway is gone) raises; `stop()`
    true (the health watch saw the cluster fail) ends the run early."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    source: Iterator[Frame] = iter(frames)
    lock = threading.Lock()
    outcomes: collections.Counter = collections.Counter()
    errors: list[BaseException] = []

    def worker() -> None:
        link = _Link((host, int(port)), answer_timeout)
        while not errors and not (stop is not None and stop()):
            with lock:
                frame = next(source, None)
            if frame is None:
                break
            try:
                outcome = link.exchange(frame)
            except BaseException as exc:  # noqa: BLE001 - reported to the caller
                errors.append(exc)
                break
            with lock:
                outcomes[outcome] += 1
                if on_frame is not None:
                    on_frame(outcome)
        link._drop("")

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return outcomes
