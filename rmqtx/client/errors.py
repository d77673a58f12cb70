"""Client exceptions carrying RocketMQ's response code and remark, as Java's MQ*Exception do."""

from __future__ import annotations

#: Code used when the failure did not come from a RocketMQ answer (no route, timeout, closed).
NO_CODE = -1


class MQError(Exception):
    """Base of the client's errors: ``code`` and ``remark`` say what went wrong."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"CODE: {code}  DESC: {remark}")
        self.code = code
        self.remark = remark


class MQClientError(MQError):
    """The client could not do it: bad argument, no route, connection failure, timeout."""


class MQBrokerError(MQError):
    """A broker answered with a non-success code; ``broker_addr`` says which one."""

    def __init__(self, code: int, remark: str | None, broker_addr: str | None = None) -> None:
        super().__init__(code, remark)
        self.broker_addr = broker_addr
