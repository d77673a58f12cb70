"""rmqtx.spark: read RocketMQ store directories (Java- or rmqtx-written) as Spark DataFrames."""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the `rocketmq`, `rocketmq_consumequeue`, `rocketmq_topics` and `rocketmq_offsets` formats.

    Unless PYSPARK_PYTHON or spark.pyspark.python names one, Spark's workers would start whatever
    ``python3`` is on PATH, which lacks pyarrow and rmqtx outside an activated venv; the formats
    then run on this very Python.
    """
    from .configs import OffsetsDataSource, TopicsDataSource
    from .datasource import ConsumeQueueDataSource, RocketMQDataSource

    use_this_python(spark)
    for source in (RocketMQDataSource, ConsumeQueueDataSource, TopicsDataSource, OffsetsDataSource):
        spark.dataSource.register(source)


def use_this_python(spark: SparkSession) -> None:
    """Point the session's Python workers at sys.executable when nothing chose a worker Python."""
    if os.environ.get("PYSPARK_PYTHON") or not sys.executable:
        return
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect: the server side chooses its workers' Python
        return
    if sc.getConf().get("spark.pyspark.python"):
        return
    os.environ["PYSPARK_PYTHON"] = sys.executable  # sessions made later in this process too
    sc.pythonExec = sys.executable  # a registered source keeps the Python its context had then
