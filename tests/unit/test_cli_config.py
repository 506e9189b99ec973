"""`raygroups up` with a bad value starts nothing: one line naming the option or setting, exit 2;
`raygroups config` lists every setting; RAYGROUPS_* environment variables; --version."""

import json

import pytest
from typer.testing import CliRunner

import cluster.launcher as launcher
from cluster.cli import app
from cluster.config import SETTINGS


@pytest.fixture
def nothing_starts(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launcher, "start_cluster", lambda *a, **k: pytest.fail("a cluster was started"))
    for name in [n for n in __import__("os").environ if n.startswith("RAYGROUPS_")]:
        monkeypatch.delenv(name)


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("args, message", [
    (["--gateways", "0"], "--gateways: expected auto, per-node or a positive integer, got 0"),
    (["--gateways", "-2"], "--gateways: expected auto, per-node or a positive integer"),
    (["--coordinators", "0"], "--coordinators: must be at least 1, got 0"),
    (["--share-coordinators", "-1"], "--share-coordinators: must be at least 1, got -1"),
    (["--partition-leaders", "two"], "--partition-leaders: expected an integer, got 'two'"),
    (["--port", "65536"], "--port: must be between 0 and 65535, got 65536"),
    (["--port", "-1"], "--port: must be between 0 and 65535, got -1"),
    (["--port", "http"], "--port: expected an integer, got 'http'"),
    (["--metrics-port", "99999"], "--metrics-port: must be between -1 and 65535"),
    (["--config", "num.partitions=abc"], "bad value for num.partitions: expected an integer, got 'abc'"),
    (["--config", "group.share.delivery.count.limit=100"],
     "bad value for group.share.delivery.count.limit: must be between 2 and 10, got 100"),
    (["--config", "group.share.record.lock.duration.ms=10"], "bad value for group.share.record.lock.duration.ms"),
    (["--config", "no.such=1"], "unknown configuration 'no.such' (`raygroups config` lists every setting)"),
    (["--config", "num.partitions"], "--config expects name=value"),
    (["--config-file", "missing.properties"], "cannot read config file missing.properties"),
])
def test_bad_values_are_one_line_and_start_nothing(nothing_starts, args, message):
    line = one_line_error(CliRunner().invoke(app, ["up", *args]))
    assert message in line


def test_environment_variables_are_read_like_options(nothing_starts):
    result = CliRunner().invoke(app, ["up"], env={"RAYGROUPS_PORT": "abc"})
    assert "--port: expected an integer, got 'abc'" in one_line_error(result)
    result = CliRunner().invoke(app, ["up"], env={"RAYGROUPS_CONFIG": "num.partitions=1 group.max.size=0"})
    assert "bad value for group.max.size: must be at least 1" in one_line_error(result)
    result = CliRunner().invoke(app, ["up"], env={"RAYGROUPS_COORDINATORS": "0"})
    assert "--coordinators" in one_line_error(result)


def test_up_passes_options_from_the_environment(monkeypatch, tmp_path):
    seen = {}

    def start_cluster(cfg, data_dir, host, port, **kwargs):
        seen.update(cfg=cfg, data_dir=data_dir, host=host, port=port)
        raise launcher.RayJoinError("stop here")

    monkeypatch.setattr(launcher, "start_cluster", start_cluster)
    env = {"RAYGROUPS_PORT": "19092", "RAYGROUPS_DATA_DIR": str(tmp_path / "d"), "RAYGROUPS_COORDINATORS": "3",
           "RAYGROUPS_METRICS_PORT": "0", "RAYGROUPS_DASHBOARD": "1", "RAYGROUPS_HOST": "127.0.0.2"}
    result = CliRunner().invoke(app, ["up"], env=env)
    assert "stop here" in result.output
    assert (seen["port"], seen["host"], seen["data_dir"]) == (19092, "127.0.0.2", tmp_path / "d")
    assert seen["cfg"]["raygroups.coordinators"] == 3
    assert seen["cfg"]["raygroups.metrics.port"] == 0
    assert seen["cfg"]["raygroups.dashboard"] is True


def test_every_option_of_every_raygroups_command_has_an_environment_variable():
    import typer.main

    group = typer.main.get_command(app)
    assert {"experiment", "check", "report", "demo"} <= set(group.commands)  # the load-test jobs too
    for name in group.commands:
        command = group.commands[name]
        commands = command.commands.values() if hasattr(command, "commands") else [command]
        for cmd in commands:
            for param in cmd.params:
                if param.param_type_name == "option" and param.name != "help":
                    assert param.envvar and param.envvar.startswith("RAYGROUPS_"), (cmd.name, param.name)


def test_help_shows_the_environment_variables():
    result = CliRunner().invoke(app, ["up", "--help"], env={"COLUMNS": "250"})
    for var in ("RAYGROUPS_PORT", "RAYGROUPS_DATA_DIR", "RAYGROUPS_CONFIG_FILE"):
        assert var in result.output


def test_a_failed_start_points_to_rays_logs(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)

    def start_cluster(*a, **k):
        raise RuntimeError("controller died\nTraceback...\nActorDiedError: the actor died unexpectedly")

    monkeypatch.setattr(launcher, "start_cluster", start_cluster)
    line = one_line_error(CliRunner().invoke(app, ["up"]))
    assert "cluster did not start: ActorDiedError: the actor died unexpectedly" in line
    assert "Ray's logs: " in line and "logs" in line.rsplit("Ray's logs: ", 1)[1]


def test_version_names_raygroups_ray_and_python():
    import platform

    import ray

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("raygroups ")
    assert f"Ray {ray.__version__}" in result.output and f"Python {platform.python_version()}" in result.output


def test_config_lists_every_setting_with_default_range_and_meaning():
    result = CliRunner().invoke(app, ["config", "--json"])
    assert result.exit_code == 0
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert set(rows) == set(SETTINGS)
    assert rows["group.share.delivery.count.limit"] == {
        "name": "group.share.delivery.count.limit", "default": "5", "range": "[2,...,10]",
        "meaning": SETTINGS["group.share.delivery.count.limit"].doc,
    }
    table = CliRunner().invoke(app, ["config"], env={"COLUMNS": "250"})
    assert table.exit_code == 0
    assert "group.share.record.lock.duration.ms" in table.output and "[1000,...,3600000]" in table.output


def test_an_error_with_brackets_prints_them(capsys):
    # rich markup would swallow "[dashboard]" and "[::1]" (the --dashboard hint lost its extra's name).
    import typer
    from cluster.cli_output import fail

    with pytest.raises(typer.Exit):
        fail("pip install 'raygroups[dashboard]' or use [::1]:9092")
    assert "raygroups[dashboard]" in capsys.readouterr().err.replace("\n", "")
