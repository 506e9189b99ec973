"""What one connection's server side knows about its peer: which listener it came on (and that
listener's limits), and who it is.

KafkaConnection consults it to refuse what the listener does not serve; the SASL handlers move it
from unauthenticated to authenticated.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from cluster.gateway.auth.principals import ANONYMOUS
from cluster.gateway.connection_limits import ListenerLimits


class ListenerKind(enum.Enum):
    CLIENT = "client"  # Kafka clients (and super users' operator requests)
    OPERATOR = "operator"  # raygroups' operator API only, bound to localhost by default


@dataclass(slots=True)
class Session:
    kind: ListenerKind = ListenerKind.CLIENT
    # None until SASL succeeds on a SASL listener; ANONYMOUS where nothing authenticates.
    principal: str | None = ANONYMOUS
    sasl: Any = field(default=None)  # the SASL exchange under way (auth/scram.py), if any
    limits: ListenerLimits = ListenerLimits()  # the listener's idle timeout, SASL receive size, failure delay

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    @property
    def operator_listener(self) -> bool:
        return self.kind is ListenerKind.OPERATOR
