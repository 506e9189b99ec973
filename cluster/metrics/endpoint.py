"""http://HOST:PORT/metrics on the driver's node: one endpoint for the whole cluster.

prometheus_client serves it from a thread of its own; each scrape runs `ClusterCollector.collect`,
which asks the controller (through its client) for every live actor's snapshot. The controller
bounds each actor's answer by `timeout`, so a dead or slow actor is skipped and counted, and the
scrape never hangs; a controller that does not answer gives a scrape with only that said.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric

from cluster.metrics.collect import families

log = logging.getLogger(__name__)

Gather = Callable[[float], list[dict[str, Any]]]  # timeout per actor -> what the controller gathered
SCRAPE_TIMEOUT = 3.0  # seconds per actor; Prometheus' own scrape timeout defaults to 10


class ClusterCollector:
    def __init__(self, gather: Gather, timeout: float = SCRAPE_TIMEOUT) -> None:
        self.gather = gather
        self.timeout = timeout

    def describe(self) -> list[Metric]:
        return []  # the families depend on what the actors say: none are described up front

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        try:
            gathered = self.gather(self.timeout)
        except Exception as exc:  # the controller did not answer: say so rather than fail the scrape
            log.warning("metrics scrape: the controller did not answer: %s", exc)
            gathered = [{"name": "controller", "kind": "controller", "error": str(exc)}]
        yield from families(gathered, time.perf_counter() - started)


@dataclass
class MetricsEndpoint:
    server: Any
    thread: Any
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    @classmethod
    def start(cls, gather: Gather, host: str, port: int, timeout: float = SCRAPE_TIMEOUT) -> "MetricsEndpoint":
        """Serve on host:port (0: a free port)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(ClusterCollector(gather, timeout))
        server, thread = start_http_server(port, addr=host, registry=registry)
        return cls(server, thread, host, server.server_address[1])

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
