"""Kafka's modern MemberState (KIP-848), one enum for the members of consumer and share groups as in
Kafka, with the byte values the groups' current-member-assignment records store."""

from __future__ import annotations

import enum


class MemberState(enum.IntEnum):
    STABLE = 0  # reconciled with the target assignment
    UNREVOKED_PARTITIONS = 1  # must revoke partitions before it can move to the next epoch
    UNRELEASED_PARTITIONS = 2  # at the target epoch, waiting for partitions others still own
    UNKNOWN = 127  # a state a newer coordinator wrote and this one does not know

    @classmethod
    def from_value(cls, value: int) -> "MemberState":
        """Kafka's MemberState.fromValue: an unknown value reads as UNKNOWN (a downgraded
        coordinator then fences the member), never as an error."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN
