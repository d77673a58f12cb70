"""The broker's ACL: the request guard, plain_acl.yml reloads, and the ACL admin request codes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import orjson
from twisted.internet import defer, task, threads
from twisted.logger import Logger

from rmqtx.acl.plain import (
    AclConfigError,
    AclTable,
    KEY_MIN_LENGTH,
    bump_version,
    check_resource_perms,
    read_doc,
    write_doc,
)
from rmqtx.acl.validator import AclRefusal, validate
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import RemotingProtocol

log = Logger(namespace="rmqtx.acl")
#: How often plain_acl.yml's stat is polled for changes (seconds).
POLL_SECONDS = 1.0


def default_acl_path(configured: str) -> Path:
    """``aclFilePath`` when set, else ``$ROCKETMQ_HOME/conf/plain_acl.yml`` as Java, else ``./conf/plain_acl.yml``."""
    if configured:
        return Path(configured).expanduser().resolve()
    home = os.environ.get("ROCKETMQ_HOME")
    return (Path(home) if home else Path.cwd()).resolve() / "conf" / "plain_acl.yml"


def _split(value: str | None) -> list[str] | None:
    """Java's UtilAll.split: ``None`` stays ``None``, else comma-separated items."""
    if value is None:
        return None
    return [item for item in value.split(",")] if value else []


class AclService:
    """Holds the current :class:`AclTable`; ``guard`` is the broker's one pre-dispatch hook."""

    def __init__(self, path: Path, broker_identity: Callable[[], tuple[str, str, str]], reactor: Any = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.path = path
        self.identity = broker_identity  # (cluster, broker name, broker address)
        self.table = AclTable([], {})
        self._stamp: tuple[int, int, int] | None = None
        self._poll: task.LoopingCall | None = None
        self._write_lock = defer.DeferredLock()
        #: (host, port) of the broker's own loopback connections (the gRPC endpoint's): each is let through,
        #: as Apache's proxy in local mode calls the broker in-process; consumed at its first request
        self.internal_peers: set[tuple[str, int]] = set()

    # -- loading ----------------------------------------------------------------------------
    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def load(self) -> None:
        """Blocking first load at broker start; creates an empty file as Java does."""
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch(mode=0o600)
        self._stamp = self._stat()
        self.table = AclTable.from_doc(read_doc(self.path))
        log.info("ACL on: {n} account(s) from {path}", n=len(self.table.accounts), path=str(self.path))

    def start(self) -> None:
        self._poll = task.LoopingCall(self._check_file)
        self._poll.clock = self.reactor
        self._poll.start(POLL_SECONDS, now=False)

    def stop(self) -> None:
        if self._poll is not None and self._poll.running:
            self._poll.stop()

    def _check_file(self) -> "defer.Deferred[None] | None":
        stamp = self._stat()
        if stamp == self._stamp:
            return None
        self._stamp = stamp
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self._read_table).addCallbacks(
            self._swap, self._reload_failed
        )

    def _read_table(self) -> AclTable:
        return AclTable.from_doc(read_doc(self.path))

    def _swap(self, table: AclTable) -> None:
        self.table = table
        log.info("ACL reloaded: {n} account(s) from {path}", n=len(table.accounts), path=str(self.path))

    def _reload_failed(self, failure: Any) -> None:
        why = failure.value if failure.check(AclConfigError) else f"{type(failure.value).__name__}"
        log.warn("ACL reload of {path} failed, keeping the previous table: {why}", path=str(self.path), why=why)

    # -- the guard ----------------------------------------------------------------------------
    def guard(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand | None:
        """``None`` to let the request through, else the refusal to answer."""
        host = conn.attributes.get("acl.host")
        if host is None:
            peer = conn.transport.getPeer()
            host = conn.attributes["acl.host"] = getattr(peer, "host", "")
            if (host, getattr(peer, "port", 0)) in self.internal_peers:
                self.internal_peers.discard((host, peer.port))
                conn.attributes["acl.internal"] = True
        if conn.attributes.get("acl.internal"):
            return None
        try:
            validate(self.table, request, host)
        except AclRefusal as refusal:
            log.warn("ACL refused code {code} from {peer}: {why}", code=request.code, peer=conn.peer, why=str(refusal))
            return request.make_response(ResponseCode.SYSTEM_ERROR, refusal.remark)
        return None

    # -- admin codes ----------------------------------------------------------------------------
    def table_of_handlers(self) -> dict[int, Callable]:
        return {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_account,
            RequestCode.DELETE_ACL_CONFIG: self.delete_account,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.acl_info,
        }

    async def _rewrite(self, change: Callable[[dict], None]) -> None:
        """Read, change and atomically rewrite plain_acl.yml off the reactor, then reload it."""
        await self._write_lock.acquire()
        try:
            def work() -> AclTable:
                doc = read_doc(self.path) or {}
                if not isinstance(doc, dict):
                    raise AclConfigError("plain_acl.yml is not a mapping")
                change(doc)
                bump_version(doc)
                table = AclTable.from_doc(doc)  # refuse what would not load back
                write_doc(self.path, doc)
                return table

            table = await threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), work)
            self._stamp = self._stat()
            self.table = table
        finally:
            self._write_lock.release()

    async def update_account(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        ext = request.ext_fields or {}
        ak, sk = ext.get("accessKey"), ext.get("secretKey")
        failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        if ak is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                "org.apache.rocketmq.remoting.exception.RemotingCommandException: the custom field <accessKey> is null",
            )
        if sk is None or len(ak) <= KEY_MIN_LENGTH or len(sk) <= KEY_MIN_LENGTH:
            return request.make_response(failed, f"The accessKey={ak} and secretKey=****** cannot be null and length should longer than 6")
        topic_perms, group_perms = _split(ext.get("topicPerms")), _split(ext.get("groupPerms"))
        try:
            check_resource_perms(topic_perms)
            check_resource_perms(group_perms)
        except AclConfigError as exc:
            return request.make_response(failed, str(exc))
        fields: dict[str, Any] = {"accessKey": ak, "secretKey": sk}
        if ext.get("whiteRemoteAddress") is not None:
            fields["whiteRemoteAddress"] = ext["whiteRemoteAddress"]
        fields["admin"] = ext.get("admin", "false").strip().lower() == "true"
        for key in ("defaultTopicPerm", "defaultGroupPerm"):
            if ext.get(key):
                fields[key] = ext[key]
        if topic_perms is not None:
            fields["topicPerms"] = topic_perms
        if group_perms is not None:
            fields["groupPerms"] = group_perms

        def change(doc: dict) -> None:
            accounts = doc.get("accounts")
            if not isinstance(accounts, list):
                accounts = doc["accounts"] = []
            for account in accounts:
                if isinstance(account, dict) and account.get("accessKey") == ak:
                    account.update(fields)
                    return
            accounts.append(fields)

        try:
            await self._rewrite(change)
        except (AclConfigError, OSError) as exc:
            log.warn("UPDATE_AND_CREATE_ACL_CONFIG for {ak} failed: {why}", ak=ak, why=type(exc).__name__)
            return request.make_response(failed, str(exc))
        log.info("ACL account {ak} updated by {peer}", ak=ak, peer=conn.peer)
        return request.make_response(ResponseCode.SUCCESS)

    async def delete_account(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        ak = (request.ext_fields or {}).get("accessKey")
        if ak is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                "org.apache.rocketmq.remoting.exception.RemotingCommandException: the custom field <accessKey> is null",
            )
        failed = request.make_response(
            ResponseCode.DELETE_ACL_CONFIG_FAILED, f"The accesskey[{ak}] corresponding to accessConfig has been deleted failed."
        )
        if not ak or ak not in self.table.accounts:
            return failed
        found = []

        def change(doc: dict) -> None:
            accounts = doc.get("accounts") or []
            kept = [a for a in accounts if not (isinstance(a, dict) and a.get("accessKey") == ak)]
            found.append(len(kept) != len(accounts))
            doc["accounts"] = kept

        try:
            await self._rewrite(change)
        except (AclConfigError, OSError) as exc:
            return request.make_response(ResponseCode.DELETE_ACL_CONFIG_FAILED, str(exc))
        log.info("ACL account {ak} deleted by {peer}", ak=ak, peer=conn.peer)
        return request.make_response(ResponseCode.SUCCESS) if found and found[0] else failed

    async def update_global_white(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        ext = request.ext_fields or {}
        addrs = ext.get("globalWhiteAddrs")
        if addrs is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                "org.apache.rocketmq.remoting.exception.RemotingCommandException: the custom field <globalWhiteAddrs> is null",
            )
        failed = request.make_response(
            ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, f"The globalWhiteAddresses[{addrs}] has been updated failed."
        )
        target = ext.get("aclFileFullPath")
        if target and Path(target).expanduser().resolve() != self.path:
            return failed  # rmqtx keeps one ACL file

        def change(doc: dict) -> None:
            doc["globalWhiteRemoteAddresses"] = _split(addrs)

        try:
            await self._rewrite(change)
        except (AclConfigError, OSError) as exc:
            return request.make_response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, str(exc))
        log.info("ACL global white addresses updated by {peer}", peer=conn.peer)
        return request.make_response(ResponseCode.SUCCESS)

    def acl_info(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        cluster, name, addr = self.identity()
        version = {"counter": self.table.counter, "timestamp": self.table.timestamp}
        fields = {
            "version": orjson.dumps(version).decode(),
            "allAclFileVersion": orjson.dumps({str(self.path): version}).decode(),
            "brokerName": name,
            "brokerAddr": addr,
            "clusterName": cluster,
        }
        return request.make_response(ResponseCode.SUCCESS, ext_fields=fields)

