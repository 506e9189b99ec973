"""Subscription regular expressions (KIP-848): RE2 syntax, matched against whole topic names, as
Kafka's coordinator does with RE2/J (`Pattern.compile(regex).matcher(topic).matches()`).

google-re2 is the same RE2 engine (a well-kept binding; Python's `re` has another syntax and
backtracking, so a regex Kafka accepts could fail or mean something else here). Compiled patterns
are cached: a group's few regexes are matched against every topic on each refresh.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid regex is the member's error, answered; not a log line


@functools.lru_cache(maxsize=1024)
def _compiled(regex: str) -> "re2._Regexp":
    return re2.compile(regex, _OPTIONS)


def invalid_reason(regex: str) -> str | None:
    """Why `regex` is not a valid RE2 regular expression, or None (Kafka's
    throwIfRegularExpressionIsInvalid; the reason is RE2's own message)."""
    try:
        _compiled(regex)
    except re2.error as e:
        reason = e.args[0] if e.args else str(e)
        return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
    return None


def resolve(regexes: Iterable[str], topic_names: Iterable[str]) -> dict[str, frozenset[str]]:
    """Kafka's refreshRegularExpressions: each regex -> the topic names it matches whole. A regex
    that does not compile (validated when a member brought it, so only an old log could hold one)
    matches nothing, as Kafka logs and ignores it."""
    names = sorted(topic_names)
    out: dict[str, frozenset[str]] = {}
    for regex in sorted(set(regexes)):
        try:
            pattern = _compiled(regex)
        except re2.error:
            out[regex] = frozenset()
            continue
        out[regex] = frozenset(n for n in names if pattern.fullmatch(n) is not None)
    return out
