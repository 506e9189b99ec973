"""What a caller of the runtime can be told instead of an answer (each is a Kafka error code)."""

from __future__ import annotations


class NotCoordinator(Exception):
    """This runtime does not lead the partition at that epoch (Kafka NOT_COORDINATOR)."""


class LoadInProgress(Exception):
    """The partition is still replaying its log (Kafka COORDINATOR_LOAD_IN_PROGRESS)."""


class StorageError(Exception):
    """The batch holding this operation's records could not be written (KAFKA_STORAGE_ERROR)."""


class NotEnoughReplicas(Exception):
    """The partition has fewer in-sync replicas than min.insync.replicas: the batch was refused
    before anything was written. Kafka's coordinators answer COORDINATOR_NOT_AVAILABLE for it
    (CoordinatorOperationExceptionHelper), so that the client looks the coordinator up again."""


class WriteTimeout(Exception):
    """The batch was written but not committed within the write timeout (Kafka's
    offsets.commit.timeout.ms, share.coordinator.write.timeout.ms). The state it made stays, as in
    Kafka, and commits once the replicas catch up; the caller is told COORDINATOR_NOT_AVAILABLE."""


# Everything the runtime raises instead of an answer; each maps to a Kafka error code.
RUNTIME_ERRORS = (NotCoordinator, LoadInProgress, StorageError, NotEnoughReplicas, WriteTimeout)
