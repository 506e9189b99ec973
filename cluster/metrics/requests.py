"""A gateway's request metrics: one call per answered request, a few dict adds.

The API label is Kafka's request name (`Produce`, `OffsetCommit`), as in Kafka's RequestMetrics
`request=` tag; each key's label tuple is built once.
"""

from __future__ import annotations

from cluster.gateway.apis import ADMIN_API_KEY, ApiKey
from cluster.metrics.registry import REGISTRY, Labels

_LABELS: dict[int, Labels] = {}


def api_name(api_key: int) -> str:
    if api_key == ADMIN_API_KEY:
        return "RaygroupsAdmin"
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


def record_request(api_key: int, latency_ms: float, bytes_in: int, bytes_out: int) -> None:
    labels = _LABELS.get(api_key)
    if labels is None:
        labels = _LABELS[api_key] = (("api", api_name(api_key)),)
    REGISTRY.inc("requests", labels)
    REGISTRY.inc("bytes_in", labels, bytes_in)
    REGISTRY.inc("bytes_out", labels, bytes_out)
    REGISTRY.observe("request_latency_ms", latency_ms, labels)
