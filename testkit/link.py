"""A loopback TCP relay that can be cut like a dead link (bytes vanish both ways, no FIN, no RST) and healed:
a partition without ``ip netns`` (which needs root and CAP_NET_ADMIN, which CI may not have)."""

from __future__ import annotations

import socket
import threading


class Link:
    """A TCP relay to target (listening on 127.0.0.1, any port, unless told) that can be cut and healed."""

    def __init__(self, target: str, listen: tuple[str, int] = ("127.0.0.1", 0),
                 rewrite: tuple[bytes, bytes] | None = None) -> None:
        """``rewrite``: (old, new) of the same length, replaced in what target answers, e.g. the address a
        controller names as its leader, so that the client keeps going through this link. Assumes the
        string does not straddle two reads (short frames on loopback)."""
        if rewrite is not None and len(rewrite[0]) != len(rewrite[1]):
            raise ValueError("a rewrite must keep the length (frames carry their length)")
        self.rewrite = rewrite
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(listen)
        self.listener.settimeout(0.2)
        self.addr = "%s:%d" % self.listener.getsockname()[:2]
        self.down = threading.Event()
        self.closing = threading.Event()
        self.socks: list[socket.socket] = []
        self.lock = threading.Lock()
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.socks.append(conn)
                self.accepted += 1
            if self.down.is_set():
                continue  # a connection attempt across a cut link: accepted by nobody, answered by nobody
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                conn.close()
                continue
            upstream.settimeout(None)  # a quiet link is not a dead one: only a cut or the far end ends it
            with self.lock:
                self.socks.append(upstream)
            for src, dst, answers in ((conn, upstream, False), (upstream, conn, True)):
                threading.Thread(target=self._pump, args=(src, dst, answers), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool = False) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                if not self.down.is_set():  # across a cut link a close is not seen either
                    self._close(dst)
                return
            if self.down.is_set():
                continue  # lost on the way
            if answers and self.rewrite is not None:
                data = data.replace(*self.rewrite)
            try:
                dst.sendall(data)
            except OSError:
                return

    @staticmethod
    def _close(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def cut(self) -> None:
        self.down.set()

    def heal(self) -> None:
        """The link is back: connections that lived across the cut are reset, new ones go through."""
        with self.lock:
            stale, self.socks = self.socks, []
        for sock in stale:
            self._close(sock)
        self.down.clear()

    def close(self) -> None:
        self.closing.set()
        self.listener.close()
        self.heal()
