"""rmqtx.spark: read RocketMQ store directories (Java- or rmqtx-written) as Spark DataFrames."""
from __future__ import annotations


def register(spark) -> None:
    """Register the `rocketmq`, `rocketmq_consumequeue`, `rocketmq_topics` and `rocketmq_offsets` formats."""
    from .configs import OffsetsDataSource, TopicsDataSource
    from .datasource import ConsumeQueueDataSource, RocketMQDataSource

    for source in (RocketMQDataSource, ConsumeQueueDataSource, TopicsDataSource, OffsetsDataSource):
        spark.dataSource.register(source)
