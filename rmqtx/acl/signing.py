"""Request signatures as the Java client's AclClientRPCHook makes them.

The signed content is every ext field value but the signature's, in the keys' sorted order
(Java's TreeMap: UTF-16 code unit order), then the body; HMAC-SHA1 with the secret key, base64.
"""

from __future__ import annotations

import base64
import hmac
from typing import Iterable, Mapping

from rmqtx.remoting.command import RemotingCommand

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
#: The broker leaves this field out of what it checks (MixAll.UNIQUE_MSG_QUERY_FLAG).
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
#: MQVersion.Version.V4_9_3's ordinal: ACL 2.0 brokers leave _UNIQUE_KEY_QUERY out of the signature of
#: requests from clients this old or older, as 1.0 brokers do for everyone.
V4_9_3 = 399


def _java_order(key: str) -> bytes:
    """Java's String order: UTF-16 code units (Python's own order differs only above U+FFFF)."""
    return key.encode("utf-16-be", "surrogatepass")


def signed_content(ext: Mapping[str, str], body: bytes | None, skip: Iterable[str] = (SIGNATURE,)) -> bytes:
    """The bytes a signature covers."""
    skipped = set(skip)
    keys = sorted(ext) if all(k.isascii() for k in ext) else sorted(ext, key=_java_order)
    values = "".join(ext[k] for k in keys if k not in skipped)
    return values.encode("utf-8", "surrogatepass") + (body or b"")


def signature(content: bytes, secret_key: str) -> str:
    """Base64 of HMAC-SHA1 over ``content``."""
    return base64.b64encode(hmac.digest(secret_key.encode("utf-8"), content, "sha1")).decode("ascii")


def sign_request(cmd: RemotingCommand, access_key: str, secret_key: str, security_token: str | None = None) -> None:
    """Add AccessKey (and SecurityToken) and the Signature to ``cmd``'s ext fields."""
    ext = cmd.ext_fields
    if ext is None:
        ext = cmd.ext_fields = {}
    ext[ACCESS_KEY] = access_key
    if security_token is not None:
        ext[SECURITY_TOKEN] = security_token
    # _UNIQUE_KEY_QUERY rides beside QUERY_MESSAGE's header. ACL 1.0 brokers leave it out of the check;
    # ACL 2.0 ones do so only for clients of 4.9.3 or older. Signing without it and saying 4.9.3 on that
    # request passes both (Java 4.9.4+ signs it and is refused by 1.0 brokers).
    if UNIQUE_KEY_QUERY in ext and cmd.version > V4_9_3:
        cmd.version = V4_9_3
    ext[SIGNATURE] = signature(signed_content(ext, cmd.body, (SIGNATURE, UNIQUE_KEY_QUERY)), secret_key)


class RequestSigner:
    """A client-side hook that signs every outgoing request; holds the secret, never shows it."""

    __slots__ = ("access_key", "_secret_key", "security_token")

    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        self.access_key = access_key
        self._secret_key = secret_key
        self.security_token = security_token

    def __call__(self, cmd: RemotingCommand) -> None:
        if not cmd.is_response:
            sign_request(cmd, self.access_key, self._secret_key, self.security_token)

    def __repr__(self) -> str:
        return f"<RequestSigner access_key={self.access_key!r}>"
