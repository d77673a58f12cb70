"""Live rmqtx brokers for the network Spark tests: one NameServer, broker groups a and b."""
from __future__ import annotations

import time

from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from testkit.standalone import call
from testkit.ha import Cluster, Sender, wait_until

GROUPS = ("broker-a", "broker-b")


class TwoBrokers:
    """`twistd rmqnamesrv` and two `twistd rmqbroker` masters (brokerName a, b) on loopback.

    SQL92 filtering is on (enablePropertyFilter), as a user who pushes SQL filters would set it.
    """

    def __init__(self, names: tuple[str, ...] = GROUPS) -> None:
        self.cluster = Cluster()
        self.namesrv = self.cluster.namesrv.addr
        self.brokers = {}
        try:
            for name in names:
                self.brokers[name] = self.cluster.broker(name, brokerName=name, brokerClusterName="SparkCluster",
                                                         enablePropertyFilter="true",
                                                         mappedFileSizeCommitLog=str(4 << 20))
            for b in self.brokers.values():
                b.start()
        except BaseException:
            self.close()
            raise
        self.senders: dict = {}

    def close(self) -> list[str]:
        for s in self.senders.values():
            s.close()
        return self.cluster.close()

    def create_topic(self, topic: str, queues: int = 2) -> None:
        """The topic on every broker group, then wait until the NameServer routes to all of them."""
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
                  "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        for b in self.brokers.values():
            resp = call(b.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
            assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)

        def routed() -> bool:
            from rmqtx.client.route import TopicRoute

            resp = call(self.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 2)
            if resp.code != ResponseCode.SUCCESS:
                return False
            return {q.broker_name for q in TopicRoute.from_body(resp.body).queue_datas} == set(self.brokers)
        wait_until(routed, 20, f"a route of {topic} over {sorted(self.brokers)}")

    def send(self, broker: str, topic: str, queue_id: int, body: bytes, **props: str) -> int:
        """One message to a queue of one broker group; returns its queue offset."""
        for attempt in (0, 1):
            if broker not in self.senders:
                self.senders[broker] = Sender(self.brokers[broker].addr, "P_spark_tests")
            try:
                resp = self.senders[broker].send(topic, body, queue_id, **props)
                break
            except ConnectionError:  # brokers close connections idle for 120 s, as Java's do
                self.senders.pop(broker).close()
                if attempt:
                    raise
        assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
        return int(resp.ext_fields["queueOffset"])

    def send_born(self, broker: str, topic: str, queue_id: int, body: bytes, born_ms: int, **props: str) -> int:
        """One message with a chosen bornTimestamp (event time for windowed pipelines); returns its queue offset."""
        from rmqtx.common.message import properties_to_string
        from rmqtx.remoting.headers import SendMessageRequestHeader, send_header_to_v2
        from rmqtx.spark.wire import Connection

        header = SendMessageRequestHeader(
            producerGroup="P_spark_tests", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4,
            queueId=queue_id, sysFlag=0, bornTimestamp=born_ms, flag=0, properties=properties_to_string(props),
            reconsumeTimes=0, unitMode=False, batch=False)
        fields, order = send_header_to_v2(header)
        if ("born", broker) not in self.senders:
            self.senders[("born", broker)] = Connection(self.brokers[broker].addr)  # type: ignore[index]
        resp = self.senders[("born", broker)].call(  # type: ignore[index]
            RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=body, fast_keys=order))
        assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
        return int(resp.ext_fields["queueOffset"])

    def fill(self, topic: str, count: int, queues: int = 2, prefix: str = "m", start: int = 0) -> list[dict]:
        """`count` messages spread over every queue of both groups; returns what was sent, by body."""
        sent = []
        names = sorted(self.brokers)
        for i in range(start, start + count):
            broker, qid = names[i % len(names)], (i // len(names)) % queues
            body = f"{prefix}-{i}".encode()
            props = {"TAGS": f"Tag{i % 3}", "KEYS": f"k{i}", "n": str(i), "UNIQ_KEY": f"{topic}-{prefix}-{i}"}
            off = self.send(broker, topic, qid, body, **props)
            sent.append({"i": i, "broker": broker, "queueId": qid, "queueOffset": off, "body": body,
                         "tags": props["TAGS"], "n": i, "storeMs": int(time.time() * 1000)})
        return sent
