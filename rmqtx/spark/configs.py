"""The broker's config/*.json files as DataFrames (`rocketmq_topics`, `rocketmq_offsets`).

The Java broker writes them with fastjson, which leaves integer map keys bare (`{0:48}`), so
they are read with a tolerant parser; like Java's ConfigManager, a missing, empty or unreadable
file falls back to its `.bak` copy.
"""
from __future__ import annotations

import json
import logging
import os
import re
from typing import Any, Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

from .options import store_root

log = logging.getLogger("rmqtx.spark")

# A JSON string (left alone) or a bare integer key after "{" or ",".
_BARE_KEY = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)')

TOPICS_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("readQueueNums", IntegerType()),
    StructField("writeQueueNums", IntegerType()),
    StructField("perm", IntegerType()),
    StructField("topicSysFlag", IntegerType()),
    StructField("order", BooleanType()),
    StructField("topicFilterType", StringType()),
])
OFFSETS_SCHEMA = StructType([
    StructField("group", StringType()),
    StructField("topic", StringType()),
    StructField("queueId", IntegerType()),
    StructField("offset", LongType()),
])


def loads_fastjson(text: str) -> Any:
    """Parse fastjson output, quoting bare integer keys outside strings."""
    return json.loads(_BARE_KEY.sub(
        lambda m: m.group(0) if m.group(1) is None else f'{m.group(1)}"{m.group(2)}"{m.group(3)}', text))


def load_config(root: str, name: str) -> dict:
    """config/<name> parsed, else its .bak, else {} (a broker that never wrote it)."""
    for path in (os.path.join(root, "config", name), os.path.join(root, "config", name + ".bak")):
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            if text.strip():
                return loads_fastjson(text)
        except FileNotFoundError:
            continue
        except ValueError as e:
            log.warning("%s is not readable (%s); trying its backup", path, e)
    return {}


def topic_rows(root: str) -> list[tuple]:
    table = load_config(root, "topics.json").get("topicConfigTable", {})
    return [(name, c.get("readQueueNums"), c.get("writeQueueNums"), c.get("perm"), c.get("topicSysFlag"),
             c.get("order"), c.get("topicFilterType")) for name, c in sorted(table.items())]


def offset_rows(root: str) -> list[tuple]:
    """(group, topic, queueId, offset) for every "topic@group" entry of consumerOffset.json."""
    table = load_config(root, "consumerOffset.json").get("offsetTable", {})
    rows = []
    for key, queues in sorted(table.items()):
        topic, _, group = key.partition("@")
        rows += [(group, topic, int(q), int(off)) for q, off in sorted(queues.items(), key=lambda kv: int(kv[0]))]
    return rows


class _ConfigReader(DataSourceReader):
    def __init__(self, rows: list[tuple]) -> None:
        self.rows = rows

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        yield from self.rows


class TopicsDataSource(DataSource):
    """spark.read.format("rocketmq_topics").load(store): config/topics.json, one row per topic."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq_topics"

    def schema(self) -> StructType:
        return TOPICS_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _ConfigReader(topic_rows(store_root(self.options)))


class OffsetsDataSource(DataSource):
    """spark.read.format("rocketmq_offsets").load(store): committed offsets per group and queue."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq_offsets"

    def schema(self) -> StructType:
        return OFFSETS_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _ConfigReader(offset_rows(store_root(self.options)))
