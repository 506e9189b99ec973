"""The operator commands' SASL/TLS settings come from RAYGROUPS_* environment variables."""

from __future__ import annotations

import pytest
import typer

from cluster.admin_client import Security
from cluster.cli import operator_security


def test_no_variables_means_a_plain_operator_connection():
    assert operator_security({}) is None


def test_the_kafka_client_settings_build_the_security():
    env = {
        "RAYGROUPS_SECURITY_PROTOCOL": "SASL_SSL",
        "RAYGROUPS_SASL_MECHANISM": "SCRAM-SHA-512",
        "RAYGROUPS_SASL_USERNAME": "admin",
        "RAYGROUPS_SASL_PASSWORD": "secret",
        "RAYGROUPS_SSL_CA_LOCATION": "/etc/ca.pem",
    }
    assert operator_security(env) == Security("SASL_SSL", "SCRAM-SHA-512", "admin", "secret", "/etc/ca.pem")


@pytest.mark.parametrize(
    "env",
    [
        {"RAYGROUPS_SECURITY_PROTOCOL": "KERBEROS"},
        {"RAYGROUPS_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "RAYGROUPS_SASL_USERNAME": "admin"},
    ],
)
def test_an_unusable_setting_is_a_usage_error(env):
    with pytest.raises(typer.Exit) as exited:
        operator_security(env)
    assert exited.value.exit_code == 2
