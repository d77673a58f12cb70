"""KV config (namespace -> key -> value), persisted to kvConfig.json in Java's file format.

The file is ``{"configTable":{"NS":{"k":"v"}}}`` as fastjson writes it. Writes are atomic (temp
file, fsync, ``os.replace``) and run in the reactor's thread pool, one after another, so the
reactor never blocks on disk; the load at start-up is synchronous.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable

from twisted.internet import defer, threads
from twisted.logger import Logger

from rmqtx.common import fastjson
from rmqtx.common.fastjson import JavaMap
from twisted.python.failure import Failure

log = Logger(namespace="rmqtx.namesrv.kv")

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigError(Exception):
    """kvConfig.json exists but cannot be read; refusing to start rather than overwrite it."""


def write_atomically(path: str, content: bytes) -> None:
    """Replace ``path`` with ``content`` so readers see the old file or the new one, never half."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class KVConfigManager:
    """The KV tables and their file; mutations return a Deferred that fires once persisted."""

    def __init__(self, path: str, deferred_writer: Callable[..., defer.Deferred] | None = None) -> None:
        self.path = os.path.expanduser(path)
        self.config_table: dict[str, dict[str, str]] = {}
        self._defer_to_thread = deferred_writer or threads.deferToThread
        self._last_write: defer.Deferred = defer.succeed(None)

    # -- file ----------------------------------------------------------------------------------
    def load(self) -> None:
        """Read the file if it exists (blocking: start-up only)."""
        try:
            with open(self.path, "rb") as f:
                content = f.read()
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warn("cannot read {path}: {exc}", path=self.path, exc=exc)
            return
        if not content.strip():
            return
        try:
            doc = fastjson.loads(content)
            table = doc.get("configTable") or {}
            loaded = {
                str(ns): {str(k): str(v) for k, v in kv.items() if v is not None}
                for ns, kv in table.items()
                if isinstance(kv, dict)
            }
        except (fastjson.FastjsonError, AttributeError, UnicodeDecodeError) as exc:
            raise KVConfigError(f"{self.path} is not a KV config file: {exc}") from exc
        self.config_table.update(loaded)
        log.info("load KV config table OK ({n} namespaces)", n=len(loaded))

    def encode_file(self) -> bytes:
        table = JavaMap({ns: JavaMap(kv) for ns, kv in self.config_table.items()})
        return fastjson.dumps({"configTable": table})

    def persist(self) -> defer.Deferred:
        """Write a snapshot of the tables after any write still in flight."""
        content = self.encode_file()
        path = self.path

        def write(_: object) -> defer.Deferred:
            return self._defer_to_thread(write_atomically, path, content)

        def failed(failure: Failure) -> None:
            log.failure("persist kvconfig failed, {path}", failure, path=path)

        self._last_write = self._last_write.addCallback(write).addErrback(failed)
        return self.flushed()

    def flushed(self) -> defer.Deferred:
        """Fires (with None) when every write so far has reached the disk, or failed and was logged."""
        done: defer.Deferred = defer.Deferred()

        def fire(result: object) -> object:
            done.callback(None)
            return result

        self._last_write.addBoth(fire)
        return done

    # -- tables --------------------------------------------------------------------------------
    def put(self, namespace: str, key: str, value: str) -> defer.Deferred:
        table = self.config_table.setdefault(namespace, {})
        previous = table.get(key)
        table[key] = value
        log.info("putKVConfig {what} config item, Namespace: {ns} Key: {key} Value: {value}",
                 what="update" if previous is not None else "create new", ns=namespace, key=key, value=value)
        return self.persist()

    def delete(self, namespace: str, key: str) -> defer.Deferred:
        table = self.config_table.get(namespace)
        if table is not None:
            value = table.pop(key, None)
            log.info("deleteKVConfig Namespace: {ns} Key: {key} Value: {value}", ns=namespace, key=key, value=value)
        return self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        table = self.config_table.get(namespace)
        return table.get(key) if table is not None else None

    def list_body(self, namespace: str) -> bytes | None:
        """KVTable body ``{"table":{...}}`` for a namespace, None when there is no such namespace."""
        table = self.config_table.get(namespace)
        if table is None:
            return None
        return fastjson.dumps({"table": JavaMap(table)})
