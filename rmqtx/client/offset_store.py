"""Consumer offsets: on the broker for CLUSTERING, in a local file for BROADCASTING (like Java)."""

from __future__ import annotations

import os
from pathlib import Path

from twisted.logger import Logger

from rmqtx.client.errors import MQBrokerError, MQClientError
from rmqtx.client.message import MessageQueue
from rmqtx.client.mq_client import MQClientInstance
from rmqtx.client.util import java_fields
from rmqtx.common import fastjson
from rmqtx.remoting import RemotingCommand
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.headers import QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader

log = Logger(namespace="rmqtx.client.offsets")

#: readOffset's answers when nothing is known: -1 "no offset yet", -2 "could not ask".
NOT_FOUND = -1
UNREACHABLE = -2


class OffsetStore:
    """The in-memory table both stores share; ``update`` with ``increase_only`` never goes back."""

    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        old = self.table.get(mq)
        if old is None or not increase_only or offset > old:
            self.table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        return self.table.get(mq, NOT_FOUND)

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    async def load(self) -> None:
        """Read persisted offsets, when the store has a place of its own."""

    async def read_store(self, mq: MessageQueue) -> int:
        raise NotImplementedError

    async def persist(self, mqs: list[MessageQueue]) -> None:
        raise NotImplementedError


class RemoteOffsetStore(OffsetStore):
    """RemoteBrokerOffsetStore: QUERY_CONSUMER_OFFSET to read, oneway UPDATE_CONSUMER_OFFSET to save."""

    def __init__(self, client: MQClientInstance, group: str) -> None:
        super().__init__()
        self.client = client
        self.group = group

    async def read_store(self, mq: MessageQueue) -> int:
        header = QueryConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id, mq.broker_name)
        try:
            addr = await self.client.find_master_addr(mq.broker_name, mq.topic)
            response = await self.client.call(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, java_fields(header)))
        except MQBrokerError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                return NOT_FOUND
            log.warn("query offset of {mq} failed: {exc}", mq=mq, exc=exc)
            return UNREACHABLE
        except MQClientError as exc:
            log.warn("query offset of {mq} failed: {exc}", mq=mq, exc=exc)
            return UNREACHABLE
        offset = int(response.field("offset") or 0)
        self.update(mq, offset)
        return offset

    async def persist(self, mqs: list[MessageQueue]) -> None:
        for mq in mqs:
            offset = self.table.get(mq)
            if offset is None:
                continue
            header = UpdateConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id, offset, mq.broker_name)
            try:
                addr = await self.client.find_master_addr(mq.broker_name, mq.topic)
                await self.client.oneway(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, java_fields(header), oneway=True))
            except MQClientError as exc:
                log.warn("persist offset of {mq} failed: {exc}", mq=mq, exc=exc)


class LocalOffsetStore(OffsetStore):
    """LocalFileOffsetStore: ``{dir}/{clientId}/{group}/offsets.json`` in Java's OffsetSerializeWrapper form."""

    def __init__(self, base_dir: str | os.PathLike[str], client_id: str, group: str) -> None:
        super().__init__()
        self.path = Path(base_dir) / client_id / group / "offsets.json"

    async def load(self) -> None:
        for path in (self.path, self.path.with_suffix(".json.bak")):
            try:
                data = fastjson.loads(path.read_bytes())
            except (OSError, ValueError):
                continue
            for key, offset in (data.get("offsetTable") or {}).items():
                self.table[MessageQueue.from_json(dict(key))] = int(offset)
            return

    async def read_store(self, mq: MessageQueue) -> int:
        await self.load()
        return self.table.get(mq, NOT_FOUND)

    async def persist(self, mqs: list[MessageQueue]) -> None:
        wanted = set(mqs)
        table = fastjson.OrderedMap(
            (tuple(sorted(mq.to_json().items())), offset) for mq, offset in self.table.items() if mq in wanted
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self.path.replace(self.path.with_suffix(".json.bak"))
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_bytes(fastjson.dumps({"offsetTable": table}))
        tmp.replace(self.path)
