"""The answer to an operator request that arrives where operators are not served.

It is refused before anything runs, with an error naming the operator listener: that listener is
bound to localhost by default, so naming it gives a remote caller nothing, and lets the CLI on the
gateway's machine find it from the Kafka bootstrap address alone (cluster/admin_client.py).
"""

from __future__ import annotations

import msgpack

REFUSED = "operator requests are served only on the operator listener or to a super user"


def refusal(operator_address: str | None) -> bytes:
    answer: dict[str, object] = {"ok": False, "error": REFUSED, "refused": True}
    if operator_address:
        answer["operator"] = operator_address
        answer["error"] = f"{REFUSED}; the operator listener is {operator_address}"
    return msgpack.packb(answer)
