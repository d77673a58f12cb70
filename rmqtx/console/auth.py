"""Who may run console admin actions: nobody unless enabled; with ACL on, only plain_acl.yml admin accounts."""

from __future__ import annotations

import base64
import hmac
from typing import Any


class Refused(Exception):
    """An admin action not allowed; ``status`` is 403 (disabled, not admin) or 401 (credentials wanted)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def credentials(authorization: bytes | None, access_key: bytes | None, secret_key: bytes | None) -> tuple[str, str] | None:
    """(accessKey, secretKey) from HTTP basic auth, or from the X-Access-Key / X-Secret-Key headers."""
    if access_key and secret_key:
        return access_key.decode("utf-8", "replace"), secret_key.decode("utf-8", "replace")
    if authorization and authorization[:6].lower() == b"basic ":
        try:
            user, _, password = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        return user, password
    return None


def check_admin(broker: Any, admin_enabled: bool, creds: tuple[str, str] | None) -> str:
    """The account that may act ("" without ACL), or raise Refused."""
    if not admin_enabled:
        raise Refused("admin actions are disabled: set consoleAdminEnable=true in broker.conf", 403)
    acl = getattr(broker, "acl", None)
    if acl is None:
        return ""
    if creds is None:
        raise Refused("ACL is on: give an admin account's accessKey and secretKey", 401)
    access_key, secret_key = creds
    account = acl.table.accounts.get(access_key)
    if account is None or not hmac.compare_digest(account.secret_key.encode(), secret_key.encode()):
        raise Refused("unknown accessKey or wrong secretKey", 401)
    if not account.admin:
        raise Refused(f"account {access_key} is not an admin account in plain_acl.yml", 403)
    return access_key
