"""A test certificate authority and a gateway keystore signed by it, as PEM files (trustme)."""

from __future__ import annotations

from pathlib import Path

import trustme


def write_keystore_and_ca(directory: Path, *hosts: str) -> tuple[Path, Path]:
    """(keystore.pem: the certificate chain for `hosts` and its key, ca.pem: the CA that signed it)."""
    ca = trustme.CA()
    cert = ca.issue_cert(*(hosts or ("127.0.0.1", "localhost")))
    keystore = directory / "keystore.pem"
    keystore.write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems) + cert.private_key_pem.bytes())
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return keystore, ca_file
