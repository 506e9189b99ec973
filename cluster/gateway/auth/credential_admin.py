"""AlterUserScramCredentials and DescribeUserScramCredentials decided over the stored users.

Kafka's rules (ScramControlManager, ScramImage.describe): each user may appear once per request,
deletions and upsertions together, else DUPLICATE_RESOURCE; a mechanism other than SCRAM-SHA-256
(type 1) or SCRAM-SHA-512 (type 2) is UNSUPPORTED_SASL_MECHANISM; an empty name or iterations
outside 4096..16384 are UNACCEPTABLE_CREDENTIAL; deleting or describing a credential that does not
exist is RESOURCE_NOT_FOUND. The client sends the salted password, never the password: the server
keeps only StoredKey and ServerKey derived from it. Pure: the caller reads and writes the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from kio.schema.errors import ErrorCode

from cluster.gateway.auth.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, credential_from_salted

MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism.type()
TYPE_OF = {name: code for code, name in MECHANISM_TYPES.items()}

Users = dict[str, dict[str, ScramCredential]]  # user -> mechanism -> credential


@dataclass(frozen=True, slots=True)
class Result:
    user: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass
class Alteration:
    """What one request changes (applied together or not at all) and its answer per user."""

    upserts: list[tuple[str, ScramCredential]] = field(default_factory=list)
    deletions: list[tuple[str, str]] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)


def _check_name_and_mechanism(name: str, mechanism: int) -> Result | None:
    if not name:
        return Result(name, ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism not in MECHANISM_TYPES:
        return Result(name, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return None


def plan_alteration(deletions: Iterable[Any], upsertions: Iterable[Any], users: Users) -> Alteration:
    """deletions: (name, mechanism); upsertions: (name, mechanism, iterations, salt, salted_password)."""
    errors: dict[str, Result] = {}
    deleting: dict[str, Any] = {}
    upserting: dict[str, Any] = {}
    duplicate = "A user credential cannot be altered twice in the same request"
    for d in deletions:
        if d.name in errors:
            continue
        if deleting.pop(d.name, None) is not None:
            errors[d.name] = Result(d.name, ErrorCode.duplicate_resource, duplicate)
            continue
        problem = _check_name_and_mechanism(d.name, d.mechanism)
        if problem is None and MECHANISM_TYPES[d.mechanism] not in users.get(d.name, {}):
            problem = Result(d.name, ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        if problem is not None:
            errors[d.name] = problem
        else:
            deleting[d.name] = d
    for u in upsertions:
        if u.name in errors:
            continue
        if deleting.pop(u.name, None) is not None or upserting.pop(u.name, None) is not None:
            errors[u.name] = Result(u.name, ErrorCode.duplicate_resource, duplicate)
            continue
        problem = _check_name_and_mechanism(u.name, u.mechanism)
        if problem is None and u.iterations < MIN_ITERATIONS:
            problem = Result(u.name, ErrorCode.unacceptable_credential, "Too few iterations")
        elif problem is None and u.iterations > MAX_ITERATIONS:
            problem = Result(u.name, ErrorCode.unacceptable_credential, "Too many iterations")
        if problem is not None:
            errors[u.name] = problem
        else:
            upserting[u.name] = u
    out = Alteration()
    for name, d in deleting.items():
        out.deletions.append((name, MECHANISM_TYPES[d.mechanism]))
        out.results.append(Result(name))
    for name, u in upserting.items():
        mechanism = MECHANISM_TYPES[u.mechanism]
        credential = credential_from_salted(mechanism, bytes(u.salted_password), bytes(u.salt), u.iterations)
        out.upserts.append((name, credential))
        out.results.append(Result(name))
    out.results.extend(errors.values())
    return out


@dataclass(frozen=True, slots=True)
class Description:
    user: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism type, iterations)


def describe(requested: Iterable[str] | None, users: Users) -> list[Description]:
    """requested None or empty: every user with a credential."""
    names = list(requested or ())
    if not names:
        names = sorted(users)
    seen: dict[str, bool] = {}  # name -> named twice
    for name in names:
        seen[name] = name in seen
    out = []
    for name, twice in seen.items():
        if twice:
            out.append(Description(name, ErrorCode.duplicate_resource,
                                   f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"))
            continue
        found = users.get(name, {})
        infos = tuple((TYPE_OF[m], c.iterations) for m, c in sorted(found.items(), key=lambda kv: TYPE_OF.get(kv[0], 0))
                      if m in TYPE_OF)
        if infos:
            out.append(Description(name, credentials=infos))
        else:
            out.append(Description(name, ErrorCode.resource_not_found,
                                   f"Attempt to describe a user credential that does not exist: {name}"))
    return out
