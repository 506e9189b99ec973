"""The gateway's TLS context from PEM key material, with Kafka's setting names.

`ssl.keystore.location` is one PEM file holding the certificate chain and the private key (Kafka's
PEM keystore file); `ssl.keystore.certificate.chain` and `ssl.keystore.key` give them inline
instead. `ssl.key.password` decrypts an encrypted key. `ssl.truststore.location` (a PEM file) or
`ssl.truststore.certificates` (inline) verify client certificates when `ssl.client.auth` asks.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    pass


def server_context(config: Mapping[str, Any] | Any) -> ssl.SSLContext:
    for name in ("ssl.keystore.type", "ssl.truststore.type"):
        if str(config[name]).upper() != "PEM":
            raise TlsConfigError(f"{name}={config[name]}: raygroups reads PEM only")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    password = config["ssl.key.password"] or None
    location, chain, key = config["ssl.keystore.location"], config["ssl.keystore.certificate.chain"], config["ssl.keystore.key"]
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif chain and key:
            _load_inline(context, chain, key, password)
        else:
            raise TlsConfigError("an SSL listener needs ssl.keystore.location, or ssl.keystore.certificate.chain "
                                 "and ssl.keystore.key")
        if config["ssl.truststore.location"]:
            context.load_verify_locations(cafile=config["ssl.truststore.location"])
        elif config["ssl.truststore.certificates"]:
            context.load_verify_locations(cadata=config["ssl.truststore.certificates"])
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load the TLS key material: {exc}") from None
    context.verify_mode = _CLIENT_AUTH[config["ssl.client.auth"]]
    return context


def _load_inline(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # The ssl module loads key material from files only: a private file, removed at once.
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(chain.strip() + "\n" + key.strip() + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)
