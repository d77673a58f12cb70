"""Shared set-up for the Spark tests: one session per test module, fixture and rmqtx-written stores."""
from __future__ import annotations

import importlib.util
import json
import os
import tarfile
import unittest
import zlib
from pathlib import Path

from rmqtx.common.message import join_properties
from rmqtx.spark.session import JavaNotFoundError, find_java
from rmqtx.store import MessageStore, MessageToStore, StoreConfig
from tests.fixtures import FIXTURES

REPO = Path(__file__).resolve().parents[2]
BASE_MS = 1_795_000_000_000


def _missing(*modules: str) -> str | None:
    gone = [m for m in modules if importlib.util.find_spec(m) is None]
    return f"{', '.join(gone)} not installed (the spark extra)" if gone else None


def _no_java() -> str | None:
    try:
        find_java()
    except JavaNotFoundError as e:
        return str(e)
    return None


NO_ARROW = _missing("numpy", "pyarrow")
NO_SPARK = NO_ARROW or _missing("pyspark") or _no_java()
requires_arrow = unittest.skipIf(NO_ARROW, NO_ARROW)
requires_spark = unittest.skipIf(NO_SPARK, NO_SPARK)


def extract(tarball: str, dest: str) -> str:
    """Unpack a fixture store; returns its root (the archive's store/ directory)."""
    with tarfile.open(FIXTURES / tarball) as tf:
        tf.extractall(dest, filter="data")
    return os.path.join(dest, "store")


def jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line.strip()]


class SparkTestCase(unittest.TestCase):
    """Starts one local SparkSession for the whole test class (start-up costs seconds).

    trial runs no class fixtures, so the first setUp runs setUpClass there; the session and temp
    directories then live until the process ends (later classes reuse the session).
    """

    spark = None

    @classmethod
    def setUpClass(cls) -> None:
        from rmqtx.spark.session import build_session

        cls._ready = cls
        cls.spark = build_session("local[2]", app_name="rmqtx-tests", conf={"spark.sql.shuffle.partitions": "4"})

    def setUp(self) -> None:
        if getattr(type(self), "_ready", None) is not type(self):
            type(self).setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.spark.stop()


def write_store(root: str) -> list[dict]:
    """Fill a store through rmqtx's MessageStore (64 KiB commit log files); returns what was put.

    Covers IPv4 and IPv6 hosts, an empty body, short and long bodies, a zlib-compressed body, no
    properties, non-ASCII property values, several topics and queues, and store times one
    second apart (a fake clock) so time filters have something to cut.
    """
    clock = [BASE_MS / 1000]
    store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=64 * 1024,
                                     mapped_file_size_consume_queue=100 * 20, message_index_enable=False),
                         clock=lambda: clock[0])
    store.load()
    put = []
    try:
        for i in range(400):
            topic, qid = ("R_A", i % 2) if i % 3 else ("R_B", 0)
            body = b"" if i == 7 else (b"r-%d " % i) * (i % 40)
            props = {"TAGS": f"Tag{i % 4}", "KEYS": f"k-{i} k2-{i}", "UNIQ_KEY": f"{i:032X}", "n": str(i)}
            sys_flag = 0
            if i == 5:
                props = {}
            if i == 9:
                props["note"] = "café ☕"
            if i == 11:
                body, sys_flag = zlib.compress(b"squeeze " * 200), 1
            host = ("::1", 5555) if i == 13 else ("10.1.2.3", 4000 + i % 3)
            msg = MessageToStore(topic=topic, queue_id=qid, flag=i % 5, body=body,
                                 properties=join_properties(props, tuple(props)),
                                 sys_flag=sys_flag, born_timestamp=BASE_MS - 5, born_host=host,
                                 store_host=("::2", 10911) if i == 17 else ("127.0.0.1", 10911), reconsume_times=i % 3)
            out = []
            store.put_message(msg).addCallback(out.append)
            res = out[0]
            put.append({"i": i, "topic": topic, "queueId": qid, "queueOffset": res.queue_offset,
                        "commitLogOffset": res.wrote_offset, "msgId": res.msg_id, "storeMs": res.store_timestamp,
                        "props": props, "body": zlib.decompress(body) if sys_flag else body, "flag": i % 5,
                        "bornHost": "[::1]:5555" if i == 13 else f"10.1.2.3:{4000 + i % 3}",
                        "reconsumeTimes": i % 3})
            clock[0] += 1
    finally:
        store.shutdown()
    return put
