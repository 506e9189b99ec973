"""Joining a Ray cluster (issue 11): an address where none answers, another Ray version, one node
or many; each a one-line error within seconds, never a silent wait."""

from __future__ import annotations

import socket
import time

import pytest
import ray
from typer.testing import CliRunner

from cluster import launcher
from cluster.cli import app
from cluster.launcher import RayJoinError

MISMATCH = (
    "Version mismatch: The cluster was started with:\n    Ray: 2.9.0\n    Python: 3.10.12\n"
    "This process on node 10.0.0.5 was started with:\n    Ray: 2.60.0\n    Python: 3.11.9\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_address_where_no_cluster_answers_is_an_error_at_once(monkeypatch):
    monkeypatch.setattr(ray, "init", lambda **_: pytest.fail("ray.init must not be reached"))
    port = free_port()
    started = time.monotonic()
    with pytest.raises(RayJoinError, match=f"no Ray cluster answers at 127.0.0.1:{port}"):
        launcher.start_ray("ns", f"127.0.0.1:{port}")
    with pytest.raises(RayJoinError, match="no Ray cluster answers"):
        launcher.start_ray("ns", f"ray://127.0.0.1:{port}")
    assert time.monotonic() - started < 5


def test_probe_targets():
    assert launcher.probe_target("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert launcher.probe_target("ray://head") == ("head", 10001)
    assert launcher.probe_target("ray://head:20001") == ("head", 20001)
    with pytest.raises(RayJoinError, match="expected auto"):
        launcher.probe_target("head")


def test_another_ray_version_is_one_line_naming_both(monkeypatch):
    monkeypatch.setattr(launcher, "check_reachable", lambda address: None)

    def init(**_):
        raise RuntimeError(MISMATCH)

    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(RayJoinError) as caught:
        launcher.start_ray("ns", "10.0.0.5:6379")
    message = str(caught.value)
    assert "\n" not in message
    assert "runs Ray 2.9.0 on Python 3.10.12" in message
    assert f"needs Ray {ray.__version__}" in message


def test_up_at_an_address_where_nothing_answers_exits_2_with_one_line(tmp_path):
    port = free_port()
    started = time.monotonic()
    result = CliRunner().invoke(app, ["up", "--address", f"127.0.0.1:{port}", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "no Ray cluster answers" in result.output
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("args, message", [
    (["--gateways", "many"], "--gateways: expected auto, per-node or a positive integer"),
    (["--advertised-host", "0.0.0.0"], "not an address a client can connect to"),
    (["--data-dir", "a", "--shared-data-dir", "b"], "not two different directories"),
])
def test_up_usage_errors(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["up", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


# -- --address auto: only the cluster `ray start` recorded (issue 21) ----------------------------------


@pytest.fixture()
def listening():
    """A port something answers on, as a Ray cluster's GCS would."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


@pytest.fixture()
def ray_temp(tmp_path, monkeypatch):
    """Ray's record of the cluster `ray start` started, in a directory of the test's own."""
    import ray._common.utils as ray_common

    record = tmp_path / "ray_current_cluster"
    monkeypatch.setattr(ray_common, "get_ray_address_file", lambda temp_dir=None: str(record))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return record


def test_auto_never_joins_a_ray_that_another_program_started_inside_itself(monkeypatch, ray_temp, listening):
    import ray._private.services as services

    # No `ray start` recorded; another process's embedded Ray (ray.init()) runs a GCS on this
    # machine, which Ray's own "auto" would join (its legacy fallback to any GCS process).
    monkeypatch.setattr(services, "find_gcs_addresses", lambda: frozenset({f"127.0.0.1:{listening}"}))
    monkeypatch.setattr(ray, "init", lambda **_: pytest.fail("ray.init must not be reached"))
    with pytest.raises(RayJoinError) as refused:
        launcher.start_ray("ns", "auto")
    message = str(refused.value)
    assert "no Ray cluster started by `ray start` is recorded on this machine" in message
    assert str(ray_temp) in message and "\n" not in message


def test_auto_joins_the_cluster_ray_start_recorded_by_its_address_and_says_so(monkeypatch, ray_temp, listening):
    ray_temp.write_text(f"127.0.0.1:{listening}\n")
    calls: list[dict] = []
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    assert launcher.join_address("auto") == (
        f"127.0.0.1:{listening}", f"the Ray cluster `ray start` recorded in {ray_temp}")
    launcher.start_ray("ns", "auto")
    # The address itself, never "auto": Ray would fall back to any GCS on the machine.
    assert calls[0]["address"] == f"127.0.0.1:{listening}"
    assert launcher.join_address("10.0.0.5:6379") == ("10.0.0.5:6379", None)
    assert launcher.join_address(None) == (None, None)


def test_auto_with_ray_address_set_joins_that(monkeypatch, ray_temp, listening):
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{listening}")
    assert launcher.join_address("auto") == (f"127.0.0.1:{listening}", "RAY_ADDRESS")


def test_auto_whose_recorded_cluster_is_gone_is_an_error_at_once(monkeypatch, ray_temp):
    ray_temp.write_text(f"127.0.0.1:{free_port()}")
    monkeypatch.setattr(ray, "init", lambda **_: pytest.fail("ray.init must not be reached"))
    with pytest.raises(RayJoinError, match="no Ray cluster answers at 127.0.0.1"):
        launcher.start_ray("ns", "auto")
