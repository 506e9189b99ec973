"""A data directory's identity: `meta.properties` with a directory id (Kafka's, KIP-858).

A Ray node has no name that outlives it (a node that restarts comes back under a new node id),
so what a replica is, for replication, is the storage it keeps its logs on: the directory id
written here the first time a data directory is used. The controller maps each directory id to a
replica id (cluster/metadata.py), so a node that restarts with its disk keeps its replicas, and
one whose disk was wiped or replaced comes back as a new replica, whose predecessor's partitions
are copied to it by reassignment.

Text, as Kafka's file: `version=1` and `directory.id=<uuid>` lines. Written to a temporary file,
fsynced, linked into place and the directory fsynced, so a crash leaves no file (and the next
start writes one) or a whole one. Every actor on a node reads it at start, so several may find it
missing at once: the link succeeds for one of them, and the others read what it wrote (one id per
directory, whoever got there first). A file that cannot be read is an error, never replaced: a
new id would make the node a stranger to its own logs.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from cluster.log.files import FileOps, LogFiles

# Set in a Ray node's environment (`RAYGROUPS_NODE_DATA_DIR=/disk ray start --address ...`), the
# data directory of every actor on that node, in place of the one `raygroups up` was given: a
# node whose disk is mounted elsewhere, or (tests, a laptop) several Ray nodes on one machine,
# each with a directory of its own as separate machines have.
NODE_DATA_DIR_ENV = "RAYGROUPS_NODE_DATA_DIR"
META_NAME = "meta.properties"
_TMP_SUFFIX = ".tmp"
_VERSION = "1"


class DataDirectoryError(RuntimeError):
    pass


def node_data_directory(configured: Path | str) -> Path:
    """The data directory on the node this process runs on."""
    return Path(os.environ.get(NODE_DATA_DIR_ENV) or configured)


def directory_id(root: Path | str) -> uuid.UUID:
    """The directory id of the data directory `root`, made and written durably on first use."""
    root = Path(root)
    path = root / META_NAME
    try:
        text = path.read_text()
    except FileNotFoundError:
        return _create(root)
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    try:
        if fields.get("version") != _VERSION:
            raise ValueError(f"version {fields.get('version')!r}")
        return uuid.UUID(fields["directory.id"])
    except (KeyError, ValueError) as exc:
        raise DataDirectoryError(f"{path}: not a raygroups data directory identity ({exc}); "
                                 "restore it, or move the directory aside to start this node afresh") from exc


def _create(root: Path) -> uuid.UUID:
    root.mkdir(parents=True, exist_ok=True)
    new = uuid.uuid4()
    # A temporary name of its own: two creators writing one tmp file would mix their ids.
    tmp = f"{META_NAME}.{new.hex}{_TMP_SUFFIX}"
    try:
        LogFiles(root, FileOps()).replace_file(META_NAME, f"version={_VERSION}\ndirectory.id={new}\n".encode(), tmp, exclusive=True)
    except FileExistsError:
        return directory_id(root)  # another actor on this node created it first
    return new
