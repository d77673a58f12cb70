"""Client settings shared by producers and consumers of one client instance."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmqtx.client.errors import NO_CODE, MQClientError

if TYPE_CHECKING:
    from twisted.internet.interfaces import IOpenSSLClientConnectionCreator

    from rmqtx.acl.signing import RequestSigner


def local_ip() -> str:
    """The host's outward IPv4 address (what Java's RemotingUtil.getLocalAddress finds), else loopback."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent; the kernel just picks a source address
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def default_instance_name() -> str:
    """Java 4.9 renames the DEFAULT instance to ``pid#nanotime`` so two clients in a process differ."""
    return f"{os.getpid()}#{time.monotonic_ns()}"


@dataclass
class ClientConfig:
    """Name servers, identity and the periods of the background tasks (seconds)."""

    namesrv_addr: str
    instance_name: str = field(default_factory=default_instance_name)
    client_ip: str = field(default_factory=local_ip)
    unit_name: str | None = None
    rpc_timeout: float = 3.0
    poll_namesrv_interval: float = 30.0
    heartbeat_interval: float = 30.0
    persist_offset_interval: float = 5.0
    rebalance_interval: float = 20.0
    #: ACL credentials: with both set, every request is signed as Java's AclClientRPCHook signs it.
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    security_token: str | None = field(default=None, repr=False)
    #: TLS to name servers and brokers (Java's -Dtls.enable=true): no certificate check unless
    #: ``tls_trust_cert_path`` is given (Java's client test mode checks nothing either).
    tls: bool = False
    tls_trust_cert_path: str = ""
    tls_cert_path: str = ""
    tls_key_path: str = ""


    @classmethod
    def resolve(
        cls,
        namesrv_addr: str | None,
        config: "ClientConfig | None",
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> "ClientConfig":
        """The config a client was given, or one built from its name server address (and keys)."""
        if config is None:
            if namesrv_addr is None:
                raise MQClientError(NO_CODE, "a name server address or a ClientConfig is required")
            config = cls(namesrv_addr)
        if access_key is not None or secret_key is not None:
            if not access_key or not secret_key:
                raise MQClientError(NO_CODE, "access_key and secret_key go together")
            config.access_key, config.secret_key = access_key, secret_key
        return config

    def tls_options(self) -> IOpenSSLClientConnectionCreator | None:
        """Client TLS options for these settings, or None for plain TCP."""
        if not self.tls:
            return None
        from rmqtx.remoting.tls import TlsClientSettings

        return TlsClientSettings(True, self.tls_cert_path, self.tls_key_path, None, bool(self.tls_trust_cert_path),
                                 self.tls_trust_cert_path).options()

    def signer(self) -> RequestSigner | None:
        """The request signer for these credentials, or None without keys."""
        if not (self.access_key and self.secret_key):
            return None
        from rmqtx.acl.signing import RequestSigner

        return RequestSigner(self.access_key, self.secret_key, self.security_token)

    @property
    def client_id(self) -> str:
        """``ip@instanceName[@unitName]``, the id brokers group connections by."""
        cid = f"{self.client_ip}@{self.instance_name}"
        return f"{cid}@{self.unit_name}" if self.unit_name else cid

    @property
    def namesrv_addrs(self) -> list[str]:
        """Name server addresses; Java separates them with ``;``."""
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]
