"""Running share consumers (tests/share_consumer_proc.py) and checking what they saw."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from cluster.admin_client import admin_call


@dataclass
class ShareConsumerProc:
    name: str
    proc: subprocess.Popen
    lines: list[dict] = field(default_factory=list)

    @staticmethod
    def start(name: str, bootstrap: str, group: str, topic: str, *args: str) -> "ShareConsumerProc":
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.share_consumer_proc", bootstrap, group, topic, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        consumer = ShareConsumerProc(name, proc)
        threading.Thread(target=consumer._read, daemon=True).start()
        return consumer

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.append({**json.loads(line), "who": self.name, "at": time.time()})
            except json.JSONDecodeError:
                pass

    def wait_for(self, event: str, timeout: float = 60) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for line in list(self.lines):
                if line["e"] == event:
                    return line
            time.sleep(0.1)
        raise AssertionError(f"{self.name} never said {event!r}; last lines: {self.lines[-5:]}")

    def wait(self, timeout: float = 180) -> int:
        code = self.proc.wait(timeout)
        time.sleep(0.2)  # let the reader thread drain the pipe
        return code

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)

    def delivered(self) -> list[dict]:
        return [line for line in self.lines if line["e"] == "delivered"]

    def acked(self) -> list[dict]:
        return [line for line in self.lines if line["e"] == "acked"]


class Deliveries:
    """Every delivery and acknowledgement of a run, per record (partition, offset)."""

    def __init__(self, consumers: list[ShareConsumerProc]) -> None:
        self.by_record: dict[tuple[int, int], list[dict]] = defaultdict(list)
        self.acked_ok: dict[tuple[int, int], list[str]] = defaultdict(list)
        self.acks_at: dict[tuple[int, int], list[dict]] = defaultdict(list)  # every answer, with its time
        for c in consumers:
            for d in c.delivered():
                self.by_record[(d["p"], d["o"])].append(d)
            for a in c.acked():
                for offset in a["o"]:
                    self.acks_at[(a["p"], offset)].append({"ok": a["ok"], "at": a["at"], "who": c.name, "error": a.get("error")})
                    if a["ok"]:
                        self.acked_ok[(a["p"], offset)].append(c.name)

    def held_twice(self, closed: tuple[str, ...] = ()) -> list[tuple[int, int]]:
        """Records two deliveries of which carry the same delivery count: held by two at once.

        Deliveries to consumers in `closed` are left out: a record released because its holder's
        session closed gives its delivery back (KAFKA-17541), so its next delivery has the same count."""
        out = []
        for k, ds in self.by_record.items():
            counted = [d for d in ds if d["who"] not in closed]
            if len({d["dc"] for d in counted}) != len(counted):
                out.append(k)
        return out

    def final_decision(self, key: tuple[int, int]) -> str | None:
        ds = sorted(self.by_record.get(key, []), key=lambda d: d["dc"])
        return ds[-1]["t"] if ds else None


def share_partitions(bootstrap: str, group: str, topic: str) -> dict[int, dict]:
    """The partition leaders' view of the group's share partitions, per partition."""
    out = {}
    for actor in admin_call(bootstrap, "actors"):
        for sp in actor.get("share_partitions", []) or []:
            if sp["group"] == group and sp["topic"] == topic:
                out[sp["partition"]] = sp
    return out


def wait_until(check, timeout: float = 30, interval: float = 0.2, what: str = "condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})")
