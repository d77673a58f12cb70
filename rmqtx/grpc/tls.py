"""TLS on the gRPC port, following the broker's ``tls.*`` settings (Java's property names).

Apache's proxy reads ``tls.server.mode`` for its gRPC port too: enforcing speaks TLS only, disabled
plain only, permissive (the gRPC port's default, as Apache's) tells them apart by the first bytes.
grpcio serves TLS with ``ssl_server_credentials`` (certificate and key from ``tls.server.certPath``/``keyPath``), but one grpcio port is either TLS or plain; so in
permissive mode grpcio listens on two loopback ports (TLS and plain) and the public port is a Twisted
front that looks at the first byte (0x16: a TLS handshake) and splices the connection to one of them,
remembering each spliced connection's real client address for the ACL's white lists. No client
certificate is asked for on this port, as Apache's proxy asks none (``ClientAuth.NONE``).
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path
from typing import Any

from twisted.internet import protocol
from twisted.logger import Logger

from rmqtx.remoting.protocol import IStreamTransport
from rmqtx.remoting.tls import TLS_HANDSHAKE_RECORD, TlsServerSettings, TlsSettings

log = Logger(namespace="rmqtx.grpc.tls")

#: The gRPC port's mode when ``tls.server.mode`` is unset: Apache's proxy takes TLS and plain clients on
#: one port by default (Java's tls.server.mode default, permissive, with a test-mode certificate), and the
#: Java 5.x SDK speaks TLS unless told not to. The remoting ports keep their own default (disabled).
DEFAULT_MODE = "permissive"


def grpc_server_settings(tls: TlsSettings) -> TlsServerSettings:
    """The broker's ``tls.server.*`` settings for the gRPC port, permissive when no mode is set."""
    return tls.server if tls.server_mode_given else dataclasses.replace(tls.server, mode=DEFAULT_MODE)


def _self_signed(hosts: list[str]) -> tuple[bytes, bytes]:
    """A throwaway key and certificate (Apache's tls.test.mode), naming ``hosts`` so that SDKs that
    check the host name (py5, node5) can be told to trust it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rmqtx")])
    alt: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for host in dict.fromkeys(hosts):
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if host:
                alt.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False).sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(settings: TlsServerSettings) -> bytes:
    """The key as unencrypted PEM (grpcio takes no password): decrypted in memory when it has one."""
    raw = Path(settings.key_path).read_bytes()
    if not settings.key_password:
        return raw
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(raw, settings.key_password.encode())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def server_credentials(settings: TlsServerSettings, hosts: list[str]) -> Any:
    """grpcio's server credentials for ``settings`` (blocking file reads: called at start)."""
    import grpc

    if settings.cert_path and settings.key_path:
        key, cert = _key_pem(settings), Path(settings.cert_path).read_bytes()
    else:
        log.warn("gRPC TLS without tls.server.certPath/keyPath: serving a self-signed certificate (test mode)")
        key, cert = _self_signed(hosts)
    if settings.need_client_auth != "none":
        log.info("tls.server.need.client.auth={auth} applies to the remoting ports; the gRPC port asks no client "
                 "certificate, as Apache's proxy (the 5.x SDKs present none)", auth=settings.need_client_auth)
    return grpc.ssl_server_credentials([(key, cert)])


class _Splice(protocol.Protocol):
    """One side of a spliced connection; writes what it reads to its peer, with flow control."""

    transport: IStreamTransport

    peer: "_Splice | None" = None

    def dataReceived(self, data: bytes) -> None:
        if self.peer is not None:
            self.peer.transport.write(data)

    def connectionLost(self, reason: Any = protocol.connectionDone) -> None:
        peer, self.peer = self.peer, None
        if peer is not None:
            peer.peer = None
            peer.transport.loseConnection()


class _Inner(_Splice):
    """The front's connection to grpcio's loopback port."""

    def __init__(self, outer: "_Front") -> None:
        self.outer = outer
        self.local_port = 0

    def connectionMade(self) -> None:
        outer = self.outer
        if outer.transport is None or outer.closed:
            self.transport.loseConnection()
            return
        self.local_port = self.transport.getHost().port
        outer.factory.origins[self.local_port] = outer.host
        self.peer, outer.peer = outer, self
        self.transport.registerProducer(outer.transport, True)
        outer.transport.registerProducer(self.transport, True)
        self.transport.write(b"".join(outer.pending))
        outer.pending.clear()
        outer.transport.resumeProducing()

    def connectionLost(self, reason: Any = protocol.connectionDone) -> None:
        self.outer.factory.origins.pop(self.local_port, None)
        super().connectionLost(reason)


class _InnerFactory(protocol.ClientFactory):
    noisy = False

    def __init__(self, outer: "_Front") -> None:
        self.outer = outer

    def buildProtocol(self, addr: Any) -> _Inner:
        inner = _Inner(self.outer)
        inner.factory = self
        return inner

    def clientConnectionFailed(self, connector: Any, reason: Any) -> None:
        self.outer.transport.loseConnection()


class _Front(_Splice):
    """A client's connection to the public port: its first byte picks grpcio's TLS or plain port."""

    def __init__(self, factory: "PermissiveFront") -> None:
        self.factory = factory
        self.pending: list[bytes] = []
        self.chosen = False
        self.closed = False
        self.host = ""

    def connectionMade(self) -> None:
        self.host = getattr(self.transport.getPeer(), "host", "")

    def dataReceived(self, data: bytes) -> None:
        if self.peer is not None:
            self.peer.transport.write(data)
            return
        self.pending.append(data)
        if self.chosen or not data:
            return
        self.chosen = True
        port = self.factory.tls_port if data[0] == TLS_HANDSHAKE_RECORD else self.factory.plain_port
        self.transport.pauseProducing()
        self.factory.reactor.connectTCP("127.0.0.1", port, _InnerFactory(self))

    def connectionLost(self, reason: Any = protocol.connectionDone) -> None:
        self.closed = True
        super().connectionLost(reason)


class PermissiveFront(protocol.ServerFactory):
    """The public gRPC port in permissive mode: TLS and plain clients alike, spliced to grpcio."""

    noisy = False

    def __init__(self, reactor: Any, tls_port: int, plain_port: int) -> None:
        self.reactor = reactor
        self.tls_port = tls_port
        self.plain_port = plain_port
        #: local port of a spliced loopback connection -> the real client's address
        self.origins: dict[int, str] = {}

    def buildProtocol(self, addr: Any) -> _Front:
        return _Front(self)

    def client_host(self, context: Any) -> str:
        """The real client of a call grpcio got through the front (grpcio sees the front's loopback side)."""
        from rmqtx.grpc.security import peer_host

        peer = context.peer() or ""
        port = peer.rpartition(":")[2]
        host = self.origins.get(int(port)) if port.isdigit() else None
        return host if host is not None else peer_host(context)
