"""Principals as Kafka names them (`User:alice`) and the one rule about super users.

A connection that did not authenticate (PLAINTEXT, SSL without a client certificate) is
`User:ANONYMOUS`, as in Kafka; an operator may list it in `super.users` to open the operator API
on a client listener on purpose, but it is never open by default.
"""

from __future__ import annotations

ANONYMOUS = "User:ANONYMOUS"


def user(name: str) -> str:
    return f"User:{name}"


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by semicolons (User:a;User:b)."""
    out = set()
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        kind, sep, name = item.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"super.users entries are Type:name (User:alice), got {item!r}")
        out.add(f"{kind}:{name}")
    return frozenset(out)


def may_operate(principal: str | None, on_operator_listener: bool, super_users: frozenset[str]) -> bool:
    """raygroups' operator API: on the operator listener, or as an authenticated super user."""
    return on_operator_listener or (principal is not None and principal in super_users)
