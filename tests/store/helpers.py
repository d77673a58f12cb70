"""Shared test helpers: fixture location, temp stores, message factories."""
from __future__ import annotations

import os
import struct
import tarfile
import tempfile
from pathlib import Path

from rmqtx.common.message import join_properties
from rmqtx.store import MessageStore, MessageToStore, StoreConfig
from tests.fixtures import FIXTURES

REPO = Path(__file__).resolve().parents[2]


def read_conf(name: str) -> dict[str, str]:
    out = {}
    for line in (FIXTURES / name).read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def extract(tarball: str, dest: str) -> str:
    """Extract a fixture store; returns the store root (the archive's store/ directory)."""
    with tarfile.open(FIXTURES / tarball) as tf:
        tf.extractall(dest, filter="data")
    return os.path.join(dest, "store")


def fixture_config(conf: str, root: str) -> StoreConfig:
    props = read_conf(conf)
    props["storePathRootDir"] = root
    props.pop("storePathCommitLog", None)
    return StoreConfig.from_properties(props)


def small_config(root: str, **kw) -> StoreConfig:
    base = dict(store_path_root_dir=root, mapped_file_size_commit_log=64 * 1024,
                mapped_file_size_consume_queue=200, max_hash_slot_num=64, max_index_num=256)
    base.update(kw)
    return StoreConfig(**base)


def msg(topic: str = "T", queue_id: int = 0, body: bytes = b"hello", tags: str | None = "TagA",
        keys: str | None = None, uniq: str | None = None, sys_flag: int = 0, extra: dict | None = None,
        born=("10.0.0.1", 5555), store=("127.0.0.1", 10911)) -> MessageToStore:
    props: dict[str, str] = {}
    if keys:
        props["KEYS"] = keys
    if uniq:
        props["UNIQ_KEY"] = uniq
    if tags:
        props["TAGS"] = tags
    props.update(extra or {})
    return MessageToStore(topic=topic, queue_id=queue_id, flag=0, body=body,
                          properties=join_properties(props, tuple(props)), sys_flag=sys_flag,
                          born_timestamp=1_700_000_000_000, born_host=born, store_host=store)


class TempStore:
    """A MessageStore in a fresh temp dir, loaded."""

    def __init__(self, **kw) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-store-")
        self.root = self.tmp.name
        self.kw = kw
        self.store = self.open()

    def open(self, clock=None) -> MessageStore:
        s = MessageStore(small_config(self.root, **self.kw), **({"clock": clock} if clock else {}))
        s.load()
        return s

    def close(self) -> None:
        self.store.shutdown()
        self.tmp.cleanup()


def put_sync(store: MessageStore, m) -> "object":
    """Run a put whose Deferred has already fired (ASYNC_FLUSH, no reactor) and return its result."""
    out = []
    d = store.put_message(m) if isinstance(m, MessageToStore) else store.put_messages(m)
    d.addCallback(out.append)
    assert out, "put Deferred did not fire synchronously"
    return out[0]


def read_cq(root: str, topic: str, qid: int) -> list[tuple[int, int, int]]:
    """Consume queue units read straight from the files (REFERENCE.md layout), not through the store."""
    d = os.path.join(root, "consumequeue", topic, str(qid))
    units = []
    for name in sorted(os.listdir(d)):
        data = open(os.path.join(d, name), "rb").read()
        for i in range(0, len(data), 20):
            u = struct.unpack_from(">qiq", data, i)
            if u == (0, 0, 0):
                break
            units.append(u)
    return units
