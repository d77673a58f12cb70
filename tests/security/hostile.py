"""Hostile request bodies: malformed JSON and JSON of the wrong shape, for every body-decoding code."""

from __future__ import annotations

from rmqtx.remoting.codes import RequestCode

#: Bodies that are not JSON, or JSON of a shape no request code expects.
BAD_BODIES: tuple[bytes, ...] = (
    b"{",
    b"\xff\xfe\x00garbage",
    b"[]",
    b"42",
    b'"text"',
    b"null",
    b'{"consumerDataSet": 5}',
    b'{"consumerDataSet": [1, 2]}',
    b'{"consumerDataSet": [{"groupName": {"x": 1}, "subscriptionDataSet": [{"codeSet": ["a"]}]}]}',
    b'{"consumerDataSet": [{"groupName": "g", "consumeType": [1], "subscriptionDataSet": 7}]}',
    b'{"consumerDataSet": [{"groupName": "g", "consumeType": "\xc2\xb2"}]}',
    b'{"producerDataSet": [{"groupName": []}]}',
    b'{"producerDataSet": {"groupName": "p"}}',
    b'{"clientID": {"a": 1}}',
    b'{"mqSet": 3}',
    b'{"mqSet": [{"topic": "t", "brokerName": "b", "queueId": "x"}]}',
    b'{"mqSet": [{"topic": "t", "brokerName": "b"}]}',
    b'{"mqSet": [{"topic": "t", "brokerName": "b", "queueId": 1e400}]}',
    b'{"groupName": "g", "retryQueueNums": "many"}',
    b'{"groupName": "g", "consumeEnable": {"a": 1}}',
    b'{"groupName": "g", "brokerId": 99999999999999999999999}',
    b'{"subscriptionData": 5}',
    b'{"subscriptionData": {"expressionType": ["SQL92"]}}',
    b'{1: 2, "x": }',
    b'{"acks": 5}',
    b'{"acks": [{"c": "g", "t": "t", "q": "x", "so": 0, "b": "AQ=="}]}',
    b'{"acks": [{"c": "g", "t": "t", "q": 0, "so": 0, "b": "not base64!"}]}',
    b'{"acks": [{"c": ["g"], "t": {"x": 1}, "b": [1, 2, "x"]}]}',
    b'{"topic": ["t"], "consumerGroup": "g", "mode": "POP"}',
    b'{"topic": "t", "consumerGroup": "g", "mode": "POP", "popShareQueueNum": "many"}',
    b'{"topic": "t", "consumerGroup": "g", "clientId": 5, "messageModel": {"a": 1}, "strategyName": null}',
)

#: Codes whose Java processor decodes the body, with ext fields that get them past their header.
BODY_CODES: dict[int, dict[str, str]] = {
    RequestCode.HEART_BEAT: {},
    RequestCode.LOCK_BATCH_MQ: {},
    RequestCode.UNLOCK_BATCH_MQ: {},
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: {},
    RequestCode.CHECK_CLIENT_CONFIG: {},
    RequestCode.UPDATE_BROKER_CONFIG: {},
    RequestCode.BATCH_ACK_MESSAGE: {},
    RequestCode.QUERY_ASSIGNMENT: {},
    RequestCode.SET_MESSAGE_REQUEST_MODE: {},
    RequestCode.SEND_BATCH_MESSAGE: {
        "a": "pg", "b": "HostileTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0", "m": "true",
    },
}

#: Well-formed bodies the fuzzer starts from (its mutations reach the decoders' deeper paths).
GOOD_BODIES: tuple[bytes, ...] = (
    b'{"clientID":"127.0.0.1@1","consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY",'
    b'"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":'
    b'[{"topic":"t","subString":"a||b","tagsSet":["a","b"],"codeSet":[97,98],"subVersion":1,'
    b'"expressionType":"TAG","classFilterMode":false}]}],"producerDataSet":[{"groupName":"p"}]}',
    b'{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"t","brokerName":"b","queueId":1}]}',
    b'{"groupName":"g","retryQueueNums":1,"retryMaxTimes":16,"consumeEnable":true,"brokerId":0}',
)


def seed_inputs() -> list[bytes]:
    """Fuzzer seeds: kind byte (0 frame, 1 heartbeat, 2 lock, 3 group, 4 ACL heartbeat) then the input."""
    from rmqtx.remoting.command import RemotingCommand
    from rmqtx.remoting.serializer import encode_frame

    frame = encode_frame(RemotingCommand.request(34, {"topic": "t", "queueId": "1"}, b"body"))[4:]
    seeds = [b"\x00" + frame]
    for kind in (1, 2, 3, 4):
        seeds += [bytes([kind]) + body for body in GOOD_BODIES + BAD_BODIES]
    return seeds


def one_input(data: bytes) -> None:
    """Decode ``data`` as the fuzzer's kind byte picks; only the decoders' own refusals may escape."""
    from rmqtx.broker.groups import SubscriptionGroupConfig
    from rmqtx.broker.processors.client_manage import _heartbeat_body
    from rmqtx.broker.processors.delivery import DeliveryProcessor
    from rmqtx.remoting.bodies import BodyError, body_shape, json_object
    from rmqtx.remoting.command import RemotingCommand
    from rmqtx.remoting.header import HeaderError
    from rmqtx.remoting.headers import PullMessageRequestHeader, send_header_from_v2
    from rmqtx.remoting.serializer import FrameError, decode_frame_payload, encode_frame

    if not data:
        return
    kind, rest = data[0] % 5, data[1:]
    if kind == 0:
        try:
            cmd = decode_frame_payload(rest)
        except FrameError:
            return
        encode_frame(cmd)  # whatever decodes must re-encode
        for header in (PullMessageRequestHeader.from_fields, send_header_from_v2):
            try:
                header(cmd.ext_fields)
            except HeaderError:
                pass
        return
    request = RemotingCommand(0, body=rest)
    if kind == 4:  # what the ACL reads of a heartbeat before any processor does
        from rmqtx.acl.validator import AclRefusal, needed_resources

        request.code, request.ext_fields = 34, {}
        try:
            needed_resources(request)
        except AclRefusal:
            pass
        return
    try:
        if kind == 1:
            _heartbeat_body(request)
        elif kind == 2:
            DeliveryProcessor._lock_body(request)
        else:
            data_obj = json_object(request.body, "SubscriptionGroupConfig")
            with body_shape("SubscriptionGroupConfig"):
                SubscriptionGroupConfig.from_json(data_obj)
    except BodyError:
        pass
