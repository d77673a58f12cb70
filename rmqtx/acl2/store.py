"""Users and ACLs kept by the broker, in ``<storePathRootDir>/config`` as Apache's local providers keep them.

Apache puts them in two RocksDB directories there (``users``, ``acls``; key: username / subject key,
value: the record's JSON). rmqtx keeps the same records, keyed the same way, in two JSON files beside
them, ``users.json`` and ``acls.json`` (mode 0600: they hold passwords). Each change is written whole
and atomically off the reactor before the admin request is answered (Apache flushes its WAL first too).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
from twisted.internet import defer, threads

from rmqtx.acl2.model import Acl, User

USERS_FILE, ACLS_FILE = "users.json", "acls.json"


def _write(path: Path, content: bytes) -> None:
    """Atomic rewrite (temp file, fsync, rename); blocking, so called in a thread."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    doc = orjson.loads(path.read_bytes() or b"{}")
    if not isinstance(doc, dict):
        raise ValueError(f"{path} is not a JSON object")
    return doc


def _ordered(table: dict[str, Any]) -> list[str]:
    """RocksDB's iteration order: the keys' UTF-8 bytes."""
    return sorted(table, key=lambda k: k.encode("utf-8", "surrogatepass"))


class AuthStore:
    def __init__(self, directory: Path, reactor: Any) -> None:
        self.directory = directory
        self.reactor = reactor
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}
        self._locks = {USERS_FILE: defer.DeferredLock(), ACLS_FILE: defer.DeferredLock()}

    def load(self) -> None:
        """Blocking read at start; a file that does not parse stops start-up (ValueError)."""
        try:
            users = _read(self.directory / USERS_FILE)
            acls = _read(self.directory / ACLS_FILE)
            self.users = {name: User.from_stored(doc) for name, doc in users.items()}
            self.acls = {key: Acl.from_stored(key, doc) for key, doc in acls.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"ACL 2.0 store {self.directory}: {exc}") from None

    def user_names(self) -> list[str]:
        return _ordered(self.users)

    def acl_keys(self) -> list[str]:
        return _ordered(self.acls)

    def _users_bytes(self) -> bytes:
        return orjson.dumps({name: self.users[name].stored() for name in self.user_names()}, option=orjson.OPT_INDENT_2)

    def _acls_bytes(self) -> bytes:
        return orjson.dumps({key: self.acls[key].stored() for key in self.acl_keys()}, option=orjson.OPT_INDENT_2)

    def save_now(self) -> None:
        """Blocking write of both files (start-up, after the initial users are made)."""
        _write(self.directory / USERS_FILE, self._users_bytes())
        _write(self.directory / ACLS_FILE, self._acls_bytes())

    async def save(self, users: bool = False, acls: bool = False) -> None:
        """Write the changed tables off the reactor, one write per file at a time, in order."""
        for name, wanted, render in ((USERS_FILE, users, self._users_bytes), (ACLS_FILE, acls, self._acls_bytes)):
            if not wanted:
                continue
            lock = self._locks[name]
            await lock.acquire()
            try:
                content = render()  # the state at the time of this write, taken on the reactor
                await threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), _write, self.directory / name, content)
            finally:
                lock.release()
