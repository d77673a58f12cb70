"""ControllerService: one node of a 5.x controller group (listener, Raft, heartbeats, elections) as a Twisted service.

Apache's DLedger controller listens for brokers on its own peer address, so does this one; pysyncobj's
Raft traffic goes to the peer port plus ``controllerRaftPortOffset``. Every check-then-commit runs under
one DeferredLock, the way Apache's single event-scheduler thread orders them: a check always reads the
state the previous commit left.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from twisted.application import service
from twisted.internet import defer, task
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IListeningPort
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqtx.common.fastjson import JavaSet, dumps, loads
from rmqtx.remoting import controller_headers as h
from rmqtx.controller.config import ControllerConfig
from rmqtx.controller.heartbeat import DEFAULT_TIMEOUT_MS, HeartbeatTable
from rmqtx.controller.processor import ControllerProcessor
from rmqtx.controller.raft import NotLeader, RaftGroup
from rmqtx.controller.replicas import ReplicasInfo, Result
from rmqtx.remoting import Dispatcher, RemotingClient, RemotingCommand, RemotingServerFactory, RequestCode, ResponseCode
from rmqtx.remoting.protocol import RemotingProtocol
from rmqtx.startup import StartupError, listen_failure, os_failure

log = Logger(namespace="rmqtx.controller")

NOT_LEADER_REMARK = "The controller is not in leader state"


class ControllerService(service.Service):
    def __init__(self, config: ControllerConfig, reactor: Any = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.config = config
        self.reactor = reactor
        self.peers = config.peers()
        self.heartbeats = HeartbeatTable(reactor.seconds)
        self.dispatcher = Dispatcher()
        ControllerProcessor(self).install(self.dispatcher)
        self.dispatcher.on_close.append(self._connection_closed)
        self.factory = RemotingServerFactory(self.dispatcher)
        self.client = RemotingClient(reactor)
        self.raft: RaftGroup | None = None
        self.port: IListeningPort | None = None
        self._writes = defer.DeferredLock()
        self._loops: list[task.LoopingCall] = []
        self._leading_since: float | None = None

    # -- lifecycle ----------------------------------------------------------------------------------
    def startService(self) -> None:
        me = self.config.controllerDLegerSelfId
        store = self.config.controllerStorePath
        try:
            os.makedirs(store, exist_ok=True)  # once, before serving
        except OSError as e:
            raise os_failure("the controller cannot create controllerStorePath", e) from None
        host, port = self.peers[me]
        try:
            self.port = self.reactor.listenTCP(port, self.factory, interface=host)
        except CannotListenError as e:
            raise listen_failure("the controller", e) from None
        others = [self.config.raft_address(n) for n in self.peers if n != me]
        try:
            self.raft = RaftGroup(self.reactor, self.config.raft_address(me), others, store)
        except Exception as e:  # pysyncobj refuses a bad address or an unreadable journal at construction
            self.port.stopListening()
            raise StartupError(f"the controller's Raft node cannot start: {e}") from None
        for period_ms, fn in ((self.config.scanNotActiveBrokerInterval, self.scan_not_active_brokers),
                              (self.config.scanInactiveMasterInterval, self.scan_inactive_masters)):
            loop = task.LoopingCall(fn)
            loop.clock = self.reactor
            loop.start(max(period_ms, 100) / 1000.0, now=False)
            self._loops.append(loop)
        super().startService()
        log.info("The controller {id} boot success. listening on {host}:{port}, raft on {raft}",
                 id=me, host=host, port=getattr(self.port.getHost(), "port", port), raft=self.config.raft_address(me))

    def stopService(self) -> defer.Deferred:
        super().stopService()
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        waits: list[defer.Deferred] = []
        if self.raft is not None:
            raft, self.raft = self.raft, None
            raft.stop()  # asks pysyncobj's thread to end; it closes its journal itself
        if self.port is not None:
            waits.append(defer.maybeDeferred(self.port.stopListening))
        self.factory.close_all()
        waits.append(self.client.close())
        return defer.DeferredList(waits, consumeErrors=True).addCallback(lambda _: None)

    # -- the leader's check-then-commit ---------------------------------------------------------------
    def is_leader(self) -> bool:
        return self.raft is not None and self.raft.is_leader()

    def run(self, check: Callable[[ReplicasInfo], Result]) -> "defer.Deferred[Result]":
        """``check`` on the leader's state, then its events committed; CONTROLLER_NOT_LEADER elsewhere."""
        return self._writes.run(self._run, check)

    @defer.inlineCallbacks
    def _run(self, check: Callable[[ReplicasInfo], Result]):  # type: ignore[no-untyped-def]
        raft = self.raft
        if raft is None or not raft.is_leader():
            return Result(None).fail(ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
        result = raft.read(check, self.config.enableElectUncleanMaster)
        if result.events:
            try:
                yield raft.commit(result.events)
            except NotLeader:
                return Result(None).fail(ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
        return result

    def elect(self, header: h.ElectMasterRequestHeader) -> "defer.Deferred[Result]":
        """An election, then (notifyBrokerRoleChanged) the role change told to the set's live brokers."""
        hb = self.heartbeats
        d = self.run(lambda s: s.elect_master(header, hb.is_alive, hb.live_info))
        return d.addCallback(self._after_elect, header.brokerName or "")

    def _after_elect(self, result: Result, name: str) -> Result:
        if result.code == ResponseCode.SUCCESS:
            log.info("elected broker {id} master of {name}", id=getattr(result.header, "masterBrokerId", None), name=name)
            if self.config.notifyBrokerRoleChanged:
                self.notify_role_changed(result)
        return result

    # -- liveness and re-election --------------------------------------------------------------------
    def scan_not_active_brokers(self) -> None:
        for cluster, name, broker_id in self.heartbeats.scan():
            log.warn("broker {name}/{id} missed its heartbeats", name=name, id=broker_id)
            self.on_broker_inactive(name, broker_id)

    def _connection_closed(self, conn: RemotingProtocol) -> None:
        for cluster, name, broker_id in self.heartbeats.on_connection_closed(conn):
            log.info("broker {name}/{id}'s connection closed", name=name, id=broker_id)
            self.on_broker_inactive(name, broker_id)

    def scan_inactive_masters(self) -> None:
        """Groups whose master is silent while a replica beats get an election. Not in a node's first
        heartbeat timeout as leader (10 s, or scanInactiveMasterInterval if longer): a node that just took
        over may not have heard a live master yet (a broker beats only the controllers that answered it),
        and electing then would depose it. A master whose connection closes is replaced at once all the same."""
        if self.raft is None or not self.is_leader():
            self._leading_since = None
            return
        now = self.reactor.seconds()
        if self._leading_since is None:
            self._leading_since = now
        if now - self._leading_since < max(self.config.scanInactiveMasterInterval, DEFAULT_TIMEOUT_MS) / 1000.0:
            return
        for name in self.raft.read(lambda s: s.sets_needing_election(self.heartbeats.is_alive)):
            self.trigger_election(name)

    def on_broker_inactive(self, name: str, broker_id: int) -> None:
        if self.raft is None or not self.is_leader():
            return
        if self.raft.read(lambda s: s.master_of(name)) == broker_id:
            self.trigger_election(name)

    @defer.inlineCallbacks
    def trigger_election(self, name: str):  # type: ignore[no-untyped-def]
        """Apache's triggerElectMaster: up to electMasterMaxRetryCount tries until one elects."""
        for _ in range(max(self.config.electMasterMaxRetryCount, 1)):
            result = yield self.elect(h.ElectMasterRequestHeader(brokerName=name))
            if result.code == ResponseCode.SUCCESS:
                return True
        log.warn("no new master elected for {name}", name=name)
        return False

    def notify_role_changed(self, result: Result) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED, oneway, to each live member of the set (RoleChangeNotifyEntry)."""
        head = result.header
        if not isinstance(head, h.ElectMasterResponseHeader) or head.masterBrokerId is None or not result.body:
            return
        body = loads(result.body)
        group = body.get("brokerMemberGroup") if isinstance(body, dict) else None
        if not group:
            return
        notify = h.NotifyBrokerRoleChangedRequestHeader(head.masterAddress, head.masterEpoch, head.syncStateSetEpoch,
                                                        head.masterBrokerId)
        sss = dumps({"syncStateSet": JavaSet(sorted(int(x) for x in body.get("syncStateSet") or [])),
                     "syncStateSetEpoch": head.syncStateSetEpoch})
        cluster, name = group.get("cluster"), group.get("brokerName")
        for bid, addr in (group.get("brokerAddrs") or {}).items():
            if not self.heartbeats.is_alive(cluster, name, int(bid)):
                continue
            request = RemotingCommand(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, body=sss)
            notify.apply_to(request)
            self.client.invoke_oneway(addr, request).addErrback(self._notify_failed, addr)

    @staticmethod
    def _notify_failed(failure: Failure, addr: str) -> None:
        log.warn("cannot notify {addr} of the role change: {e}", addr=addr, e=failure.value)

    # -- metadata ---------------------------------------------------------------------------------------
    def metadata(self) -> h.GetMetaDataResponseHeader:
        """CONTROLLER_GET_METADATA_INFO: the group, the leader's id and broker-facing address, this node's role."""
        leader_id = leader_addr = None
        if self.raft is not None:
            raft_leader = self.raft.leader()
            for node in self.peers:
                if raft_leader is not None and self.config.raft_address(node) == raft_leader:
                    host, port = self.peers[node]
                    leader_id, leader_addr = node, f"{host}:{port}"
        peers = "".join(f"{node}:{host}:{port};" for node, (host, port) in self.peers.items())
        return h.GetMetaDataResponseHeader(self.config.controllerDLegerGroup, leader_id, leader_addr,
                                           self.is_leader(), peers)
