"""Writing a read's answers to a TCP socket at once, before Twisted's next writable poll.

Twisted sends only once the reactor sees the socket writable: two epoll_ctl calls and one more
poll per read cycle, which cost as much as the answers themselves under a multiplexing client.
Telling whether nothing is queued ahead needs Twisted's private transport state, and this module is
the one place rmqtx reads it. Should a Twisted release rename those fields, the first write that
misses one turns the shortcut off for the process (one log line) and every write goes through
Twisted's public ``writeSequence`` as before.
"""

from __future__ import annotations

from twisted.internet import tcp
from twisted.logger import Logger

log = Logger(namespace="rmqtx.remoting.send_now")

#: False once this Twisted turned out to lack a field the shortcut reads (or a test turns it off).
enabled = True


def send_now(transport: object, parts: list[bytes]) -> bool:
    """Send ``parts`` on the socket now when nothing is queued before them; False leaves them to Twisted.

    What the socket does not take is queued with the transport as usual, so order is kept.
    """
    global enabled
    if not enabled or (type(transport) is not tcp.Server and type(transport) is not tcp.Client):
        return False
    t: tcp.Connection = transport
    try:
        if not t.connected or t.disconnecting or t._writeDisconnected or t._tempDataBuffer or len(t.dataBuffer) > t.offset:
            return False
        sock = t.socket
    except AttributeError as e:
        enabled = False
        log.warn("writes go through Twisted's own path from now on: this Twisted's transport has no {field}", field=e.name)
        return False
    data = b"".join(parts)
    try:
        sent = sock.send(data)
    except (BlockingIOError, InterruptedError):
        sent = 0
    except OSError:
        return False  # Twisted's own write path meets the error and closes the connection
    if sent < len(data):
        t.write(data[sent:])
    return True
