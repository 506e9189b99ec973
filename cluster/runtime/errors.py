"""What a caller of the runtime can be told instead of an answer (each is a Kafka error code)."""

from __future__ import annotations


class NotCoordinator(Exception):
    """This runtime does not lead the partition at that epoch (Kafka NOT_COORDINATOR)."""


class LoadInProgress(Exception):
    """The partition is still replaying its log (Kafka COORDINATOR_LOAD_IN_PROGRESS)."""


class StorageError(Exception):
    """The batch holding this operation's records could not be written (KAFKA_STORAGE_ERROR)."""
