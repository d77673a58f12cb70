"""The controller's replicated state: per broker set, its replicas, master, epochs and sync-state set.

As in Apache's controller, a request is first *checked* against the current state on the Raft leader,
which yields an answer and a list of events; only the events go through the Raft log and every node
*applies* them in the same order. Checking reads liveness (heartbeats, local to each node), applying
never does, so every replica of the state stays the same.

The state is plain dicts and lists so pysyncobj can pickle it into its dump file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from rmqtx.common.fastjson import JavaMap, JavaSet, dumps
from rmqtx.remoting import controller_headers as h
from rmqtx.remoting.codes import ResponseCode
from rmqtx.remoting.header import CommandHeader

#: The first broker id a broker set hands out (Apache's MixAll.FIRST_BROKER_CONTROLLER_ID).
FIRST_BROKER_ID = 1

#: (clusterName, brokerName, brokerId) -> alive?
Alive = Callable[[str, str, int], bool]
#: (clusterName, brokerName, brokerId) -> (epoch, maxOffset, electionPriority) of its last heartbeat, or None
LiveInfo = Callable[[str, str, int], Optional[tuple[int, int, int]]]

Event = tuple


@dataclass
class Result:
    """What the leader answers, and the events to commit before it answers."""

    header: CommandHeader | None = None
    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    body: bytes | None = None
    events: list[Event] = field(default_factory=list)

    def fail(self, code: int, remark: str) -> "Result":
        self.code, self.remark = code, remark
        return self


def sync_state_set_body(ids: Iterable[int], epoch: int) -> bytes:
    """SyncStateSet as fastjson writes it: a HashSet<Long> and its epoch."""
    return dumps({"syncStateSet": JavaSet(sorted(ids)), "syncStateSetEpoch": epoch})


def _new_set(cluster: str) -> dict[str, Any]:
    return {"cluster": cluster, "next_id": FIRST_BROKER_ID, "brokers": {}, "master": None,
            "master_epoch": 0, "sss": [], "sss_epoch": 0}


class ReplicasInfo:
    """Apache's ReplicasInfoManager, over ``tables``: brokerName -> broker set (see :func:`_new_set`)."""

    def __init__(self, tables: dict[str, dict[str, Any]] | None = None, elect_unclean: bool = False) -> None:
        self.tables: dict[str, dict[str, Any]] = {} if tables is None else tables
        self.elect_unclean = elect_unclean

    # -- checks (leader only; read liveness, change nothing) ------------------------------------
    def next_broker_id(self, req: h.GetNextBrokerIdRequestHeader) -> Result:
        entry = self.tables.get(req.brokerName or "")
        nxt = FIRST_BROKER_ID if entry is None else entry["next_id"]
        return Result(h.GetNextBrokerIdResponseHeader(req.clusterName, req.brokerName, nxt))

    def apply_broker_id(self, req: h.ApplyBrokerIdRequestHeader) -> Result:
        name, cluster, broker_id = req.brokerName or "", req.clusterName or "", req.appliedBrokerId
        code = req.registerCheckCode or ""
        result = Result(h.ApplyBrokerIdResponseHeader(req.clusterName, req.brokerName))
        event = ("apply_id", cluster, name, code.split(";")[0], broker_id, code)
        entry = self.tables.get(name)
        if entry is None:
            if broker_id == FIRST_BROKER_ID:
                result.events.append(event)
                return result
            return result.fail(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                               f"Broker-set: {name} hasn't been registered in controller, but broker try to apply brokerId: {broker_id}")
        known = entry["brokers"].get(broker_id)
        if known is None or known[1] == code:
            result.events.append(event)
            return result
        return result.fail(ResponseCode.CONTROLLER_BROKER_ID_INVALID, f"Fail to apply brokerId: {broker_id} in broker-set: {name}")

    def register_broker(self, req: h.RegisterBrokerToControllerRequestHeader, alive: Alive) -> Result:
        name, cluster, broker_id = req.brokerName or "", req.clusterName or "", req.brokerId
        result = Result(h.RegisterBrokerToControllerResponseHeader(req.clusterName, req.brokerName))
        entry = self.tables.get(name)
        if entry is None:
            return result.fail(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                               f"Broker-set: {name} hasn't been registered in controller")
        if broker_id not in entry["brokers"]:
            return result.fail(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                               f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}")
        master = entry["master"]
        if master is not None and alive(cluster, name, master):
            head = result.header
            assert isinstance(head, h.RegisterBrokerToControllerResponseHeader)
            head.masterBrokerId, head.masterAddress = master, self._address(entry, master)
            head.masterEpoch, head.syncStateSetEpoch = entry["master_epoch"], entry["sss_epoch"]
        result.body = sync_state_set_body(entry["sss"], entry["sss_epoch"])
        if req.brokerAddress != self._address(entry, broker_id):
            result.events.append(("update_addr", name, broker_id, req.brokerAddress))
        return result

    def elect_master(self, req: h.ElectMasterRequestHeader, alive: Alive, live_info: LiveInfo) -> Result:
        name = req.brokerName or ""
        result = Result(h.ElectMasterResponseHeader())
        head = result.header
        assert isinstance(head, h.ElectMasterResponseHeader)
        entry = self.tables.get(name)
        if entry is None:
            return result.fail(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
        cluster, old = entry["cluster"], entry["master"]
        asked = req.brokerId
        new: int | None = asked if entry["master_epoch"] == 0 else None  # the first master is whoever asks first
        if new is None or new == -1:
            prefer = asked if req.designateElect else None
            every = list(entry["brokers"]) if self.elect_unclean else None
            new = elect(cluster, name, entry["sss"], every, old, prefer, alive, live_info)
        if new is not None and new == old:
            head.masterEpoch, head.syncStateSetEpoch = entry["master_epoch"], entry["sss_epoch"]
            head.masterBrokerId, head.masterAddress = old, self._address(entry, old)
            result.body = dumps({"syncStateSet": JavaSet(sorted(entry["sss"]))})
            return result.fail(ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                               f"The old master {old} is still alive, not need to elect new master for broker {name}")
        if new is not None:
            head.masterBrokerId, head.masterAddress = new, self._address(entry, new)
            head.masterEpoch, head.syncStateSetEpoch = entry["master_epoch"] + 1, entry["sss_epoch"] + 1
            group = {"cluster": cluster, "brokerName": name,
                     "brokerAddrs": JavaMap({bid: info[0] for bid, info in entry["brokers"].items()})}
            result.body = dumps({"brokerMemberGroup": group, "syncStateSet": JavaSet([new])})
            result.events.append(("elect", name, new))
            return result
        if asked is None or asked == -1:  # triggered by the controller: record that the master is gone
            result.events.append(("elect", name, None))
            return result.fail(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                               "Old master has down and failed to elect a new broker master")
        return result.fail(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")

    def alter_sync_state_set(self, req: h.AlterSyncStateSetRequestHeader, new_set: list[int], new_epoch: int,
                             alive: Alive) -> Result:
        name = req.brokerName or ""
        result = Result(h.AlterSyncStateSetResponseHeader())
        entry = self.tables.get(name)
        failed = ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        if entry is None:
            return result.fail(failed, "Broker metadata is not existed")
        if set(entry["sss"]) == set(new_set):
            return result.fail(failed, "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet")
        master = entry["master"]
        if master is None or master != req.masterBrokerId:
            return result.fail(ResponseCode.CONTROLLER_INVALID_MASTER,
                               f"Rejecting alter syncStateSet request because the current leader is:{{{_java(master)}}}, not {{{_java(req.masterBrokerId)}}}")
        if req.masterEpoch != entry["master_epoch"]:
            return result.fail(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                               f"Rejecting alter syncStateSet request because the current master epoch is:{{{entry['master_epoch']}}}, not {{{_java(req.masterEpoch)}}}")
        if new_epoch != entry["sss_epoch"]:
            return result.fail(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                               f"Rejecting alter syncStateSet request because the current syncStateSet epoch is:{{{entry['sss_epoch']}}}, not {{{new_epoch}}}")
        for replica in new_set:
            if replica not in entry["brokers"]:
                return result.fail(ResponseCode.CONTROLLER_INVALID_REPLICAS,
                                   f"Rejecting alter syncStateSet request because the replicas {{{replica}}} don't exist")
            if not alive(entry["cluster"], name, replica):
                return result.fail(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                                   f"Rejecting alter syncStateSet request because the replicas {{{replica}}} don't alive")
        if master not in new_set:
            return result.fail(failed, f"Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin leader {{{master}}}")
        epoch = entry["sss_epoch"] + 1
        assert isinstance(result.header, h.AlterSyncStateSetResponseHeader)
        result.header.newSyncStateSetEpoch = epoch
        result.body = sync_state_set_body(new_set, epoch)
        result.events.append(("alter_sss", name, sorted(set(new_set))))
        return result

    def replica_info(self, req: h.GetReplicaInfoRequestHeader) -> Result:
        entry = self.tables.get(req.brokerName or "")
        if entry is None:
            return Result(h.GetReplicaInfoResponseHeader()).fail(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                                                                 "Broker metadata is not existed")
        master = entry["master"]
        head = h.GetReplicaInfoResponseHeader(master, self._address(entry, master), entry["master_epoch"])
        return Result(head, body=sync_state_set_body(entry["sss"], entry["sss_epoch"]))

    def sync_state_data(self, names: list[str], alive: Alive) -> Result:
        """CONTROLLER_GET_SYNC_STATE_DATA: BrokerReplicasInfo of the named broker sets."""
        table = JavaMap()
        for name in names:
            entry = self.tables.get(name)
            if entry is None:
                continue
            in_sync: list[dict[str, Any]] = []
            not_in_sync: list[dict[str, Any]] = []
            for bid in _java_long_order(entry["brokers"]):
                replica = {"brokerName": name, "brokerId": bid, "brokerAddress": entry["brokers"][bid][0],
                           "alive": alive(entry["cluster"], name, bid)}
                (in_sync if bid in entry["sss"] else not_in_sync).append(replica)
            master = entry["master"]
            table[name] = {"masterBrokerId": master, "masterAddress": self._address(entry, master),
                           "masterEpoch": entry["master_epoch"], "syncStateSetEpoch": entry["sss_epoch"],
                           "inSyncReplicas": in_sync, "notInSyncReplicas": not_in_sync}
        return Result(None, body=dumps({"replicasInfoTable": table}))

    def clean_broker_data(self, req: h.CleanControllerBrokerDataRequestHeader, alive: Alive) -> Result:
        name, cluster = req.brokerName or "", req.clusterName or ""
        ids_text = req.brokerControllerIdsToClean
        result = Result(None)
        invalid = ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        ids: list[int] | None = None
        entry = self.tables.get(name)
        if not req.isCleanLivingBroker:
            if not (ids_text or "").strip() and entry is not None and entry["master"] is not None:
                return result.fail(invalid, f"Broker {name} is still alive, clean up failure")
            if (ids_text or "").strip():
                try:
                    ids = sorted({int(x) for x in ids_text.split(";")})  # type: ignore[union-attr]
                except ValueError as e:
                    return result.fail(invalid, f"Please set the option <brokerControllerIdsToClean> according to the format, exception: {e}")
                for bid in ids:
                    if alive(cluster, name, bid):
                        return result.fail(invalid, f"Broker [{name},  {bid}] is still alive, clean up failure")
        if entry is not None:
            result.events.append(("clean", name, ids))
            return result
        return result.fail(invalid, f"Broker {name} is not existed,clean broker data failure.")

    def sets_needing_election(self, alive: Alive) -> list[str]:
        """Broker sets whose master is silent while some replica still beats."""
        out = []
        for name, entry in self.tables.items():
            master, cluster = entry["master"], entry["cluster"]
            if master is not None and not alive(cluster, name, master):
                if any(alive(cluster, name, bid) for bid in entry["brokers"]):
                    out.append(name)
        return out

    def master_of(self, name: str) -> int | None:
        entry = self.tables.get(name)
        return None if entry is None else entry["master"]

    # -- apply (every node, in log order) -------------------------------------------------------
    def apply(self, event: Event) -> None:
        kind, name = event[0], event[2] if event[0] == "apply_id" else event[1]
        entry = self.tables.get(name)
        if kind == "apply_id":
            _, cluster, _, addr, bid, code = event
            if entry is None:
                entry = self.tables[name] = _new_set(cluster)
            if bid not in entry["brokers"]:
                entry["brokers"][bid] = [addr, code]
                entry["next_id"] += 1
        elif entry is None:
            return
        elif kind == "update_addr":
            _, _, bid, addr = event
            if bid in entry["brokers"]:
                entry["brokers"][bid][0] = addr
        elif kind == "elect":
            new = event[2]
            entry["master"] = new
            entry["master_epoch"] += 1
            if new is not None:
                entry["sss"] = [new]
                entry["sss_epoch"] += 1
        elif kind == "alter_sss":
            entry["sss"] = list(event[2])
            entry["sss_epoch"] += 1
        elif kind == "clean":
            ids = event[2]
            if not ids:
                del self.tables[name]
                return
            for bid in ids:
                entry["brokers"].pop(bid, None)
                if bid in entry["sss"]:
                    entry["sss"].remove(bid)
            if not entry["brokers"] or not entry["sss"]:
                del self.tables[name]

    @staticmethod
    def _address(entry: dict[str, Any], broker_id: int | None) -> str | None:
        if broker_id is None:
            return None
        info = entry["brokers"].get(broker_id)
        return None if info is None else info[0]


def elect(cluster: str, name: str, sync_state_set: list[int], every: list[int] | None, old: int | None,
          prefer: int | None, alive: Alive, live_info: LiveInfo) -> int | None:
    """Apache's DefaultElectPolicy: the sync-state set first, then (unclean) every replica."""
    for candidates in (sync_state_set, every):
        if candidates is None:
            continue
        chosen = _try_elect(cluster, name, candidates, old, prefer, alive, live_info)
        if chosen is not None:
            return chosen
    return None


def _try_elect(cluster: str, name: str, candidates: list[int], old: int | None, prefer: int | None,
               alive: Alive, live_info: LiveInfo) -> int | None:
    valid = [b for b in candidates if alive(cluster, name, b)]
    if not valid:
        return None
    if old in valid and (prefer is None or prefer == old):
        return old
    if prefer is not None:
        return prefer if prefer in valid else None

    def rank(bid: int) -> tuple[int, int, int]:
        # newest epoch first, then the longest log, then the lowest priority number
        epoch, max_offset, priority = live_info(cluster, name, bid) or (-1, -1, 2**31 - 1)
        return (-epoch, -max_offset, priority)

    return min(valid, key=rank)


def _java_long_order(ids: Iterable[int]) -> list[int]:
    from rmqtx.common.fastjson import java_order

    return java_order(sorted(ids))


def _java(value: object) -> str:
    return "null" if value is None else str(value)
