"""`raygroups up` as a subprocess, the way users run it: wait for READY, stop with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

RAYGROUPS = str(Path(sys.executable).with_name("raygroups"))


class ClusterProcess:
    def __init__(self, data_dir: Path, *args: str, gateways: int = 1) -> None:
        self.data_dir = Path(data_dir)
        self.args = ["--port", "0", "--gateways", str(gateways), "--data-dir", str(data_dir), *args]
        self.proc: subprocess.Popen | None = None
        self.bootstrap = ""
        self.stderr_lines: list[str] = []

    def start(self, timeout: float = 120) -> "ClusterProcess":
        self.proc = subprocess.Popen(
            [RAYGROUPS, "up", *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("READY "):
                self.bootstrap = line.split()[1]
                return self
            if not line and self.proc.poll() is not None:
                break
        self.kill()
        raise RuntimeError("raygroups up did not become READY:\n" + "".join(self.stderr_lines[-30:]))

    def _drain_stderr(self) -> None:
        assert self.proc is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    @property
    def port(self) -> int:
        return int(self.bootstrap.split(",")[0].rsplit(":", 1)[1])

    @property
    def ports(self) -> list[int]:
        return [int(a.rsplit(":", 1)[1]) for a in self.bootstrap.split(",")]

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [RAYGROUPS, *args, "--bootstrap", self.bootstrap.split(",")[0]],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def stop(self, timeout: float = 90) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def events(self) -> str:
        return "".join(self.stderr_lines)

    def wait_for_event(self, *texts: str, timeout: float = 20) -> bool:
        """True once every text appears in what `raygroups up` printed (events come once a second)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(t in self.events() for t in texts):
                return True
            time.sleep(0.25)
        return False
