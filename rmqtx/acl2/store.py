"""Users and ACLs kept by the broker, in ``<storePathRootDir>/config`` as Apache 5.x's local providers keep them.

Apache's LocalAuthentication/AuthorizationMetadataProvider each own one RocksDB under its
``authConfigPath`` (``<storePathRootDir>/config``): ``users`` and ``acls``. Records live in the default
column family; the key is the username / subject key (``User:name``) in UTF-8, the value the record's
compact JSON (fastjson2's key order, which ``User.stored``/``Acl.stored`` reproduce). rmqtx opens the same
two databases through ``rocksdict`` in raw mode, so a store root moves between Apache and rmqtx either way.

Reads are served from memory (the tables are read whole at start). A change is written as one
WriteBatch of the keys whose bytes changed, its WAL synced, off the reactor, before the admin request is
answered (Apache flushes its WAL before answering too). The databases stay open (and locked) while the
broker runs, as Apache's do.

``users.json``/``acls.json`` from rmqtx before this store are imported once into fresh databases and
renamed ``*.imported``; found beside existing databases they stop start-up (which one is right is
the operator's call).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import orjson
from twisted.internet import defer, threads

from rmqtx.acl2.model import Acl, User

USERS_DB, ACLS_DB = "users", "acls"
LEGACY = {USERS_DB: "users.json", ACLS_DB: "acls.json"}


def require_rocksdict() -> None:
    """Raise ImportError when the ``rocksdb`` extra is missing (checked when ACL 2.0 is configured)."""
    importlib.import_module("rocksdict")


def options() -> Any:
    """rocksdict Options that open Apache's auth databases (and make ours): raw bytes in and out, and
    Apache's settings: in-place memtable updates (recorded in their OPTIONS files, which rocksdict reads
    back; RocksDB then wants no concurrent memtable writes), block format 5, no compression."""
    import rocksdict as raw

    opts = raw.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    opts.set_allow_concurrent_memtable_write(False)
    opts.set_inplace_update_support(True)
    opts.set_compression_type(raw.DBCompressionType.none())
    table = raw.BlockBasedOptions()
    table.set_format_version(5)
    opts.set_block_based_table_factory(table)
    return opts


class _Db:
    """One of Apache's auth databases: its default column family, read whole, written by batches."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db: Any = None
        self.written: dict[bytes, bytes] = {}  # what the database holds, as last read or written

    def exists(self) -> bool:
        return (self.path / "CURRENT").exists()

    def open(self) -> dict[bytes, bytes]:
        """Blocking; every column family found is opened (RocksDB insists), only the default one is read."""
        import rocksdict

        families = rocksdict.Rdict.list_cf(str(self.path)) if self.exists() else ["default"]
        others = {name: options() for name in families if name != "default"}
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            self.db = rocksdict.Rdict(str(self.path), options(), column_families=others or None)
        except Exception as exc:  # rocksdict raises plain Exception (a LOCK held by another broker, corruption)
            raise ValueError(f"cannot open RocksDB {self.path} (is another broker using it?): {exc}") from None
        self.written = {bytes(k): bytes(v) for k, v in self.db.items()}
        return dict(self.written)

    def write(self, puts: dict[bytes, bytes], deletes: list[bytes]) -> None:
        """Blocking: one batch, then its WAL synced, as Apache's flushWAL (measured: a write with sync set
        keeps the GIL through its fsync, stalling the reactor's thread; flush_wal does not)."""
        import rocksdict

        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in puts.items():
            batch.put(key, value)
        for key in deletes:
            batch.delete(key)
        try:
            self.db.write(batch)
            self.db.flush_wal(True)
        except Exception as exc:  # rocksdict raises plain Exception
            raise OSError(f"RocksDB {self.path}: {exc}") from None
        self.written.update(puts)
        for key in deletes:
            self.written.pop(key, None)

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None


def _key(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _ordered(table: dict[str, Any]) -> list[str]:
    """RocksDB's iteration order: the keys' UTF-8 bytes."""
    return sorted(table, key=_key)


class AuthStore:
    def __init__(self, directory: Path, reactor: Any) -> None:
        self.directory = directory
        self.reactor = reactor
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}
        self._dbs = {USERS_DB: _Db(directory / USERS_DB), ACLS_DB: _Db(directory / ACLS_DB)}
        self._locks = {USERS_DB: defer.DeferredLock(), ACLS_DB: defer.DeferredLock()}

    def load(self) -> None:
        """Blocking read at start; a record that does not parse stops start-up (ValueError)."""
        legacy = self._legacy()
        try:
            users = self._dbs[USERS_DB].open()
            acls = self._dbs[ACLS_DB].open()
            self.users = {k.decode(): User.from_stored(orjson.loads(v)) for k, v in users.items()}
            self.acls = {k.decode(): Acl.from_stored(k.decode(), orjson.loads(v)) for k, v in acls.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self.close_now()
            raise ValueError(f"ACL 2.0 store {self.directory}: {exc}") from None
        if legacy:
            self._import(legacy)

    def _legacy(self) -> dict[str, Path]:
        """rmqtx's former JSON files; beside existing databases they are refused."""
        found = {name: self.directory / file for name, file in LEGACY.items() if (self.directory / file).exists()}
        if found and any(db.exists() for db in self._dbs.values()):
            raise ValueError(f"ACL 2.0 store {self.directory}: both RocksDB ({USERS_DB}/, {ACLS_DB}/) and "
                             f"{', '.join(p.name for p in found.values())} found; move the one not wanted away")
        return found

    def _import(self, legacy: dict[str, Path]) -> None:
        """Blocking, once: the JSON files' records into the fresh databases, then the files renamed."""
        try:
            for name, path in legacy.items():
                doc = orjson.loads(path.read_bytes() or b"{}")
                if not isinstance(doc, dict):
                    raise ValueError(f"{path} is not a JSON object")
                if name == USERS_DB:
                    self.users.update((k, User.from_stored(v)) for k, v in doc.items())
                else:
                    self.acls.update((k, Acl.from_stored(k, v)) for k, v in doc.items())
            self.save_now()
            for path in legacy.values():
                os.replace(path, path.with_name(path.name + ".imported"))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self.close_now()
            raise ValueError(f"ACL 2.0 store {self.directory}: importing {', '.join(p.name for p in legacy.values())}: {exc}") from None

    def user_names(self) -> list[str]:
        return _ordered(self.users)

    def acl_keys(self) -> list[str]:
        return _ordered(self.acls)

    def _changes(self, name: str) -> tuple[dict[bytes, bytes], list[bytes]]:
        """The keys whose bytes differ from the database's (taken on the reactor: the state of now)."""
        current = ({_key(k): orjson.dumps(u.stored()) for k, u in self.users.items()} if name == USERS_DB
                   else {_key(k): orjson.dumps(a.stored()) for k, a in self.acls.items()})
        written = self._dbs[name].written
        puts = {k: v for k, v in current.items() if written.get(k) != v}
        return puts, [k for k in written if k not in current]

    def save_now(self) -> None:
        """Blocking write of both tables' changes (start-up: initial users, migrated accounts)."""
        for name in (USERS_DB, ACLS_DB):
            puts, deletes = self._changes(name)
            if puts or deletes:
                self._dbs[name].write(puts, deletes)

    async def save(self, users: bool = False, acls: bool = False) -> None:
        """Write the changed tables off the reactor, one batch per database at a time, in order."""
        for name, wanted in ((USERS_DB, users), (ACLS_DB, acls)):
            if not wanted:
                continue
            lock = self._locks[name]
            await lock.acquire()
            try:
                puts, deletes = self._changes(name)
                if puts or deletes:
                    await threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(),
                                                    self._dbs[name].write, puts, deletes)
            finally:
                lock.release()

    def close_now(self) -> None:
        for db in self._dbs.values():
            db.close()

    async def close(self) -> None:
        """After the writes under way, off the reactor (closing flushes the memtable)."""
        for name in (USERS_DB, ACLS_DB):
            await self._locks[name].acquire()
        try:
            await threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self.close_now)
        finally:
            for name in (USERS_DB, ACLS_DB):
                self._locks[name].release()
