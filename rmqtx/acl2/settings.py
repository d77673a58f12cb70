"""ACL 2.0's broker keys (Apache 5.3's AuthConfig), read from broker.conf and checked at start.

Honoured: authenticationEnabled, authorizationEnabled, the default providers and the local metadata
providers (by Apache's class names), authenticationWhitelist / authorizationWhitelist (request
codes), initAuthenticationUser, innerClientAuthenticationCredentials, the stateless or stateful
strategy (rmqtx checks every request: nothing is cached, so a change applies at once),
migrateAuthFromV1Enabled (rmqtx.acl2.migrate). Any other provider or strategy class stops start-up
with one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

_AUTHN = "org.apache.rocketmq.auth.authentication"
_AUTHZ = "org.apache.rocketmq.auth.authorization"
ALLOWED = {
    "authenticationProvider": {f"{_AUTHN}.provider.DefaultAuthenticationProvider"},
    "authorizationProvider": {f"{_AUTHZ}.provider.DefaultAuthorizationProvider"},
    "authenticationMetadataProvider": {f"{_AUTHN}.provider.LocalAuthenticationMetadataProvider"},
    "authorizationMetadataProvider": {f"{_AUTHZ}.provider.LocalAuthorizationMetadataProvider"},
    "authenticationStrategy": {f"{_AUTHN}.strategy.StatelessAuthenticationStrategy",
                               f"{_AUTHN}.strategy.StatefulAuthenticationStrategy"},
    "authorizationStrategy": {f"{_AUTHZ}.strategy.StatelessAuthorizationStrategy",
                              f"{_AUTHZ}.strategy.StatefulAuthorizationStrategy"},
}


def _flag(props: Mapping[str, str], key: str) -> bool:
    return (props.get(key) or "").strip().lower() == "true"


def _codes(text: str | None) -> frozenset[str]:
    return frozenset(item.strip() for item in (text or "").split(",") if item.strip())


@dataclass(frozen=True)
class AuthSettings:
    authentication: bool
    authorization: bool
    #: the local metadata providers are configured: users and ACLs are kept and the admin codes answer
    metadata: bool
    authn_whitelist: frozenset[str]
    authz_whitelist: frozenset[str]
    init_user: tuple[str, str | None] | None  # (username, password)
    inner_credentials: tuple[str, str] | None  # (accessKey, secretKey)
    migrate_v1: bool = False  # migrateAuthFromV1Enabled: plain_acl.yml's accounts made users at start

    @property
    def active(self) -> bool:
        return self.authentication or self.authorization or self.metadata

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "AuthSettings":
        """Raise ValueError (one line) for what rmqtx does not implement or Apache would not start with."""
        authn, authz = _flag(props, "authenticationEnabled"), _flag(props, "authorizationEnabled")
        for key, allowed in ALLOWED.items():
            value = (props.get(key) or "").strip()
            checked = "Metadata" in key or (authn if key.startswith("authentication") else authz)
            if checked and value and value not in allowed:
                raise ValueError(f"broker.conf: {key}={value} is not a class rmqtx implements"
                                 f" ({' or '.join(sorted(allowed))}); remove the key to start")
        users = bool((props.get("authenticationMetadataProvider") or "").strip())
        acls = bool((props.get("authorizationMetadataProvider") or "").strip())
        if authn and not users:
            raise ValueError("broker.conf: authenticationEnabled=true needs authenticationMetadataProvider="
                             f"{_AUTHN}.provider.LocalAuthenticationMetadataProvider (without it Apache refuses every request)")
        if authz and not (users and acls):
            raise ValueError("broker.conf: authorizationEnabled=true needs authenticationMetadataProvider and"
                             f" authorizationMetadataProvider ({_AUTHZ}.provider.LocalAuthorizationMetadataProvider)")
        if _flag(props, "aclEnable") and (authn or authz):
            raise ValueError("broker.conf: aclEnable=true (ACL 1.0) with ACL 2.0 on: rmqtx runs one of the two; remove one")
        migrate = _flag(props, "migrateAuthFromV1Enabled")
        if migrate and not (users and acls):
            raise ValueError("broker.conf: migrateAuthFromV1Enabled=true needs authenticationMetadataProvider and"
                             " authorizationMetadataProvider (the local ones) to migrate into")
        return cls(authn, authz, users or acls, _codes(props.get("authenticationWhitelist")),
                   _codes(props.get("authorizationWhitelist")), _init_user(props), _inner(props), migrate)


def _json(props: Mapping[str, str], key: str) -> dict | None:
    text = (props.get(key) or "").strip()
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise ValueError(f"broker.conf: {key} is not a JSON object")
    return doc


def _init_user(props: Mapping[str, str]) -> tuple[str, str | None] | None:
    doc = _json(props, "initAuthenticationUser")
    if doc is None:
        return None
    name, password = doc.get("username"), doc.get("password")
    if not isinstance(name, str) or not name.strip() or not isinstance(password, str) or not password.strip():
        raise ValueError("broker.conf: initAuthenticationUser needs a username and a password (Apache: Init authentication user error.)")
    return name, password


def _inner(props: Mapping[str, str]) -> tuple[str, str] | None:
    doc = _json(props, "innerClientAuthenticationCredentials")
    if doc is None:
        return None
    ak, sk = doc.get("accessKey"), doc.get("secretKey")
    if not isinstance(ak, str) or not ak.strip() or not isinstance(sk, str) or not sk.strip():
        raise ValueError("broker.conf: innerClientAuthenticationCredentials needs accessKey and secretKey")
    return ak, sk
