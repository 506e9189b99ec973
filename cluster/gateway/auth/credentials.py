"""The durable store of SCRAM credentials: one JSON file in the data directory.

Every gateway reads it (re-read when it changes on disk; a multi-node cluster shares the data
directory already, SPEC §7) and AlterUserScramCredentials writes it: under an exclusive lock, read,
change, write a temporary file, fsync, rename, so a crash leaves the old or the new file, never a
mix, and two gateways writing at once do not lose an update. `raygroups user add` writes it before
the cluster starts, as Kafka's `kafka-storage format --add-scram`.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
from pathlib import Path

from cluster.gateway.auth.scram import ScramCredential

FILE_NAME = "scram-credentials.json"


def path_in(data_dir: Path | str) -> Path:
    return Path(data_dir) / FILE_NAME


def _encode(c: ScramCredential) -> dict:
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return {"salt": b64(c.salt), "iterations": c.iterations, "stored_key": b64(c.stored_key), "server_key": b64(c.server_key)}


def _decode(mechanism: str, d: dict) -> ScramCredential:
    return ScramCredential(mechanism, base64.b64decode(d["salt"]), int(d["iterations"]),
                           base64.b64decode(d["stored_key"]), base64.b64decode(d["server_key"]))


class CredentialStore:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        # (file stamp, users read at that stamp), replaced as one: authentication threads read it too.
        self._cache: tuple[tuple[int, int] | None, dict[str, dict[str, ScramCredential]]] = (None, {})

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users().get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._cache = (None, {})
            return self._cache[1]
        stamp = (st.st_mtime_ns, st.st_size)
        cached_stamp, users = self._cache
        if stamp != cached_stamp:
            users = self._read()
            self._cache = (stamp, users)
        return users

    def _read(self) -> dict[str, dict[str, ScramCredential]]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return {user: {m: _decode(m, d) for m, d in mechs.items()} for user, mechs in raw.get("users", {}).items()}

    def change(self, upserts: list[ScramCredential | tuple[str, ScramCredential]] = (), deletions: list[tuple[str, str]] = ()) -> None:
        """Apply (user, credential) upserts and (user, mechanism) deletions atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            users = self._read()
            for user, credential in upserts:
                users.setdefault(user, {})[credential.mechanism] = credential
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism, None)
                if user in users and not users[user]:
                    del users[user]
            data = {"version": 1, "users": {u: {m: _encode(c) for m, c in ms.items()} for u, ms in users.items()}}
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w") as out:
                json.dump(data, out, indent=1, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        self._cache = (None, {})
