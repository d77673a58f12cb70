"""TLS on the remoting ports as Apache RocketMQ 4.9.8 offers it, with Java's property names.

Server: ``tls.server.mode`` = disabled | permissive | enforcing. Permissive serves TLS and plain
on one port, told apart by the first byte as Java's handshake handler does (0x16 starts a TLS
handshake record). Enforcing closes plain connections. ``tls.server.certPath``/``keyPath``
(``keyPassword``) name PEM files; without them a self-signed certificate is made at start, as
Java's default ``tls.test.mode.enable=true`` does. ``tls.server.need.client.auth`` = none |
optional | require with ``tls.server.trustCertPath`` checks client certificates.

Client (the broker's own connections, the Python client): ``tls.enable``, ``tls.client.certPath``,
``tls.client.keyPath``, ``tls.client.keyPassword``, ``tls.client.authServer`` with
``tls.client.trustCertPath``. Twisted's TLS (pyOpenSSL) does the cryptography.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from twisted.internet import protocol
from twisted.internet.interfaces import IProtocol, ITCPTransport
from twisted.logger import Logger
from twisted.protocols.policies import TimeoutMixin

log = Logger(namespace="rmqtx.remoting.tls")

MODES = ("disabled", "permissive", "enforcing")
TLS_HANDSHAKE_RECORD = 0x16


def _flag(value: str | None, default: bool = False) -> bool:
    return default if value is None else value.strip().lower() == "true"


def tls_properties(props: Mapping[str, str]) -> dict[str, str]:
    """The ``tls.*`` keys of ``props``, with a ``tls.config.file`` (Java's) filling unset ones."""
    out = {k: v.strip() for k, v in props.items() if k.startswith("tls.")}
    file = out.get("tls.config.file")
    if file and Path(file).is_file():
        from rmqtx.common.properties import load_properties

        for key, value in load_properties(file).items():
            if key.startswith("tls."):
                out.setdefault(key, value.strip())
    return out


def _load_key_and_cert(key_path: str, cert_path: str, password: str | None) -> tuple[Any, Any]:
    from OpenSSL import crypto

    key_pem = Path(key_path).read_bytes()
    key = crypto.load_privatekey(crypto.FILETYPE_PEM, key_pem, password.encode() if password else None)
    cert = crypto.load_certificate(crypto.FILETYPE_PEM, Path(cert_path).read_bytes())
    return key, cert


def _trust(path: str) -> list[Any]:
    from OpenSSL import crypto

    pem = Path(path).read_bytes()
    marker = b"-----END CERTIFICATE-----"
    return [crypto.load_certificate(crypto.FILETYPE_PEM, chunk + marker) for chunk in pem.split(marker) if chunk.strip()]


def self_signed(common_name: str = "rmqtx") -> tuple[Any, Any]:
    """A throwaway key and certificate (Java's test mode uses a self-signed one too)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    from OpenSSL import crypto

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650)).sign(key, hashes.SHA256())
    )
    return crypto.PKey.from_cryptography_key(key), crypto.X509.from_cryptography(cert)


@dataclass(frozen=True)
class TlsServerSettings:
    mode: str = "disabled"
    cert_path: str = ""
    key_path: str = ""
    key_password: str | None = None
    need_client_auth: str = "none"
    trust_cert_path: str = ""

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "TlsServerSettings":
        tls = tls_properties(props)
        mode = tls.get("tls.server.mode", "disabled").lower()
        if mode not in MODES:
            raise ValueError(f"tls.server.mode must be one of {', '.join(MODES)}, not {mode!r}")
        auth = tls.get("tls.server.need.client.auth", "none").lower()
        if _flag(tls.get("tls.server.authClient")) and auth == "none":
            auth = "require"
        return cls(mode, tls.get("tls.server.certPath", ""), tls.get("tls.server.keyPath", ""),
                   tls.get("tls.server.keyPassword") or None, auth, tls.get("tls.server.trustCertPath", ""))

    def options(self) -> Any:
        from twisted.internet import ssl

        if self.cert_path and self.key_path:
            key, cert = _load_key_and_cert(self.key_path, self.cert_path, self.key_password)
        else:
            log.warn("TLS on without tls.server.certPath/keyPath: serving a self-signed certificate (test mode)")
            key, cert = self_signed()
        verify = self.need_client_auth in ("optional", "require")
        if verify and not self.trust_cert_path:
            raise ValueError("tls.server.need.client.auth needs tls.server.trustCertPath")
        return ssl.CertificateOptions(
            privateKey=key, certificate=cert, verify=verify,
            caCerts=_trust(self.trust_cert_path) if verify else None,
            requireCertificate=self.need_client_auth == "require",
        )


@dataclass(frozen=True)
class TlsClientSettings:
    enable: bool = False
    cert_path: str = ""
    key_path: str = ""
    key_password: str | None = None
    auth_server: bool = False
    trust_cert_path: str = ""

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "TlsClientSettings":
        tls = tls_properties(props)
        return cls(_flag(tls.get("tls.enable")), tls.get("tls.client.certPath", ""), tls.get("tls.client.keyPath", ""),
                   tls.get("tls.client.keyPassword") or None, _flag(tls.get("tls.client.authServer")),
                   tls.get("tls.client.trustCertPath", ""))

    def options(self) -> Any | None:
        """Options for ``wrapClientTLS``, or None with TLS off. No host name check, as Java's client."""
        if not self.enable:
            return None
        from twisted.internet import ssl

        kwargs: dict[str, Any] = {}
        if self.cert_path and self.key_path:
            kwargs["privateKey"], kwargs["certificate"] = _load_key_and_cert(self.key_path, self.cert_path, self.key_password)
        if self.auth_server:
            if not self.trust_cert_path:
                raise ValueError("tls.client.authServer needs tls.client.trustCertPath")
            kwargs.update(verify=True, caCerts=_trust(self.trust_cert_path))
        return ssl.CertificateOptions(**kwargs)


@dataclass(frozen=True)
class TlsSettings:
    """A server's ``tls.*`` settings, read once at start (a ``tls.config.file`` too): its port's and its
    own connections'. ``server_mode_given``: tls.server.mode was set (the gRPC port has another default)."""

    server: TlsServerSettings = field(default_factory=TlsServerSettings)
    client: TlsClientSettings = field(default_factory=TlsClientSettings)
    server_mode_given: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "TlsSettings":
        """Raises ValueError for a tls.server.mode that is none of the three."""
        return cls(TlsServerSettings.from_properties(props), TlsClientSettings.from_properties(props),
                   "tls.server.mode" in tls_properties(props))


class _Sniffer(protocol.Protocol, TimeoutMixin):
    transport: ITCPTransport
    """Looks at a connection's first byte, then hands the connection to the TLS or the plain protocol."""

    def __init__(self, factory: "TlsServerFactory", addr: Any) -> None:
        self.owner = factory
        self.addr = addr
        self.inner: IProtocol | None = None
        self.refused = False

    def connectionMade(self) -> None:
        if self.owner.idle_timeout:
            self.setTimeout(self.owner.idle_timeout)

    def timeoutConnection(self) -> None:
        self.transport.loseConnection()

    def dataReceived(self, data: bytes) -> None:
        if self.inner is None:
            if self.refused or not data:
                return
            self.setTimeout(None)
            inner: IProtocol | None
            if data[0] == TLS_HANDSHAKE_RECORD:
                inner = self.owner.tls_factory.buildProtocol(self.addr)
            elif self.owner.mode == "enforcing":
                self.refused = True
                peer = self.transport.getPeer()
                log.warn("closing plain connection from {host}:{port}: tls.server.mode is enforcing",
                         host=getattr(peer, "host", "?"), port=getattr(peer, "port", 0))
                self.transport.loseConnection()
                return
            else:
                inner = self.owner.plain.buildProtocol(self.addr)
            if inner is None:  # a factory may refuse a connection
                self.transport.loseConnection()
                return
            self.inner = inner
            inner.makeConnection(self.transport)
            if getattr(self.transport, "protocol", None) is self:
                self.transport.protocol = inner  # later bytes and the close go straight to it: no extra hop
        self.inner.dataReceived(data)

    def connectionLost(self, reason: Any = protocol.connectionDone) -> None:
        self.setTimeout(None)
        if self.inner is not None:
            self.inner.connectionLost(reason)


class TlsServerFactory(protocol.ServerFactory):
    """Listening factory for permissive/enforcing: TLS or plain per connection, one remoting factory behind."""

    def __init__(self, plain: protocol.ServerFactory, settings: TlsServerSettings) -> None:
        from twisted.protocols.tls import TLSMemoryBIOFactory

        self.plain = plain
        self.mode = settings.mode
        self.idle_timeout = getattr(plain, "idle_timeout", None)
        self.tls_factory = TLSMemoryBIOFactory(settings.options(), False, plain)

    def startFactory(self) -> None:
        self.plain.doStart()

    def stopFactory(self) -> None:
        self.plain.doStop()

    def buildProtocol(self, addr: Any) -> _Sniffer:
        return _Sniffer(self, addr)


def listening_factory(plain: protocol.ServerFactory,
                      settings: "TlsServerSettings | Mapping[str, str]") -> protocol.ServerFactory:
    """What to listen with: ``plain`` itself when TLS is disabled (nothing added to the hot path).
    ``settings``: the parsed ones, or ``tls.*`` keys to parse."""
    if not isinstance(settings, TlsServerSettings):
        settings = TlsServerSettings.from_properties(settings)
    if settings.mode == "disabled":
        return plain
    log.info("TLS mode {mode} on this port", mode=settings.mode)
    return TlsServerFactory(plain, settings)
