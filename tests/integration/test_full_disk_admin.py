"""CreateTopics, CreatePartitions and DeleteTopics on a cluster whose disk is full (issue 21): each
topic answers UNKNOWN_SERVER_ERROR with no error message, as Kafka does, where the answer used to
carry the controller's Ray traceback (ANSI colours, file paths, pid, node address, actor id); the
same requests succeed once there is space again.

The data directory is a small tmpfs filled by a file, so the disk is really full for every process
of the cluster. A write that fits in the free rest of a file's last page still succeeds on a full
tmpfs, so each request here writes several pages of metadata records: a topic of 200 partitions is
a record per partition. Mounting needs root; elsewhere the module is skipped."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from tests.cluster_process import ClusterProcess
from tests.kio_client import KioClient
from tests.unit.gateway.test_error_messages import LEAK, strings


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    mount_point = tmp_path_factory.mktemp("full-disk")
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount_point)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.fixture(scope="module")
def cluster(data_dir):
    proc = ClusterProcess(data_dir / "data").start()
    yield proc
    proc.stop()


def fill(directory: Path) -> Path:
    """A file that takes every byte left on the file system."""
    filler = directory / "filler"
    chunk = b"\0" * (1 << 20)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk = chunk[: len(chunk) // 2]
                if not chunk:
                    break
    finally:
        os.close(fd)
    return filler


BIG = 200  # partitions: about 15 KB of metadata records to create, 10 KB to delete


def create(name: str, partitions: int = BIG) -> tuple[int, int, dict]:
    return ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 30_000, "validate_only": False, "topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [], "configs": []}]}


def grow(name: str, count: int) -> tuple[int, int, dict]:
    return ApiKey.CREATE_PARTITIONS, 3, {"timeout_ms": 30_000, "validate_only": False, "topics": [
        {"name": name, "count": count, "assignments": None}]}


def delete(name: str) -> tuple[int, int, dict]:
    return ApiKey.DELETE_TOPICS, 5, {"timeout_ms": 30_000, "topic_names": [name]}


def answers(response) -> list[tuple[int, str | None]]:
    entries = getattr(response, "topics", None) or getattr(response, "results", None) or response.responses
    return [(e.error_code, e.error_message) for e in entries]


def test_topic_requests_on_a_full_disk_answer_unknown_server_error_without_a_message(cluster, data_dir):
    with KioClient(cluster.bootstrap) as client:
        assert answers(client.call(*create("kept"))) == [(ErrorCode.none, None)]
        filler = fill(data_dir)
        try:
            for request in (create("new"), grow("kept", 2 * BIG), delete("kept")):
                response = client.call(*request)
                assert answers(response) == [(ErrorCode.unknown_server_error, None)], request[0]
                assert not [s for s in strings(response) if LEAK.search(s)]
        finally:
            filler.unlink()
        for request in (create("new", 1), grow("kept", BIG + 1), delete("kept")):
            assert answers(client.call(*request)) == [(ErrorCode.none, None)], request[0]
