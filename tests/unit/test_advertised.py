"""Bind and advertised addresses apart (issue 11): Metadata and FindCoordinator give what is advertised."""

from __future__ import annotations

import pytest

from cluster.advertised import advertised_address, parse_advertised, with_advertised_host
from cluster.config import Config


def test_without_advertised_listeners_the_bound_address_or_the_nodes_ip_for_every_interface():
    config = Config()
    assert advertised_address(config, "127.0.0.1", 9092, 0, "10.0.0.7") == ("127.0.0.1", 9092)
    assert advertised_address(config, "0.0.0.0", 9093, 1, "10.0.0.7") == ("10.0.0.7", 9093)
    assert advertised_address(config, "", 9093, 1, "10.0.0.7") == ("10.0.0.7", 9093)


def test_advertised_listeners_host_and_port_plus_the_broker_id():
    config = Config.load(["advertised.listeners=PLAINTEXT://kafka.example:19092"])
    assert advertised_address(config, "0.0.0.0", 9094, 2, "10.0.0.7") == ("kafka.example", 19094)


def test_advertised_host_flag_keeps_the_port_and_port_0_is_the_bound_one():
    config = with_advertised_host(Config(), "gw.svc")
    assert advertised_address(config, "0.0.0.0", 41000, 3, "10.0.0.7") == ("gw.svc", 41000)
    config = with_advertised_host(Config.load(["advertised.listeners=SSL://old:9999"]), "new")
    assert config["advertised.listeners"] == "SSL://new:9999"


@pytest.mark.parametrize("text", ["PLAINTEXT://0.0.0.0:9092", "kafka:9092", "A://h:1,B://h:2"])
def test_bad_advertised_listeners(text):
    with pytest.raises(ValueError, match="advertised.listeners"):
        parse_advertised(text)
