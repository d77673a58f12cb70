"""The matrix's security modes: what the standalone runs with and what every client cell is given.

* ``plain``: no ACL, no TLS (the full matrix).
* ``acl``: ``aclEnable=true`` with :data:`PLAIN_ACL_YML`; cells sign as :data:`USER` (a non-admin account
  with publish and subscribe rights by default), admin scenarios as :data:`ADMIN`, and the runner's own
  requests as :data:`ADMIN`. The ``acl_*`` scenarios use wrong or missing keys and expect Java's refusal.
* ``acl2``: ACL 2.0 as a RocketMQ 5.3+ user turns it on (``authenticationEnabled``, ``authorizationEnabled``,
  ``initAuthenticationUser`` making :data:`ADMIN` a Super user, Apache's default and Local providers); the runner then creates :data:`USER` and
  :data:`READER` as Normal users with the ACLs of :data:`ACL2_POLICIES` through codes 3001/3006, the way
  ``mqadmin createUser``/``createAcl`` do. Cells sign as in ``acl`` (a 5.x client's ``AclClientRPCHook``
  and gRPC credentials); refusals carry ACL 2.0's messages.
* ``tls``: ``tls.server.mode=enforcing`` on both ports (the broker registers over TLS: ``tls.enable``);
  cells connect with TLS. ``tls_plain_client`` checks that a plain client is turned away.
* ``tls-permissive``: ``tls.server.mode=permissive``: TLS cells work and so does a plain client.

Both TLS modes serve the broker's self-signed test certificate; the clients (Java's test mode, Go,
rmqtx's) do not check it. The keys below are test credentials for loopback brokers only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

USER = ("InteropUser", "interop-user-secret")
READER = ("InteropReader", "interop-reader-secret")  # may subscribe, never publish
ADMIN = ("InteropAdmin", "interop-admin-secret")
WRONG_SECRET = "interop-wrong-secret"
SECRETS = (USER[1], READER[1], ADMIN[1], WRONG_SECRET)

PLAIN_ACL_YML = f"""\
globalWhiteRemoteAddresses: []
accounts:
- accessKey: {USER[0]}
  secretKey: {USER[1]}
  whiteRemoteAddress:
  admin: false
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: PUB|SUB
- accessKey: {READER[0]}
  secretKey: {READER[1]}
  whiteRemoteAddress:
  admin: false
  defaultTopicPerm: SUB
  defaultGroupPerm: SUB
- accessKey: {ADMIN[0]}
  secretKey: {ADMIN[1]}
  whiteRemoteAddress:
  admin: true
"""

#: ACL 2.0 policies of the Normal users: resource -> actions, all Allow. The reader may not publish.
ACL2_POLICIES = {
    USER: {"Topic:*": ["Pub", "Sub"], "Group:*": ["Sub"]},
    READER: {"Topic:*": ["Sub"], "Group:*": ["Sub"]},
}

#: Scenarios that need an admin account under ACL (they create topics).
ADMIN_SCENARIOS = ("admin_topic",)


def keys(account: tuple[str, str]) -> dict[str, str]:
    return {"access_key": account[0], "secret_key": account[1]}


@dataclass(frozen=True)
class Mode:
    name: str
    acl: bool = False
    #: 1: plain_acl.yml accounts (aclEnable); 2: ACL 2.0 users and policies (RocketMQ 5.3+).
    acl_version: int = 1
    tls_server_mode: str = "disabled"
    #: ``python -m interop --mode NAME`` runs these unless --scenarios says otherwise (empty: all).
    scenarios: tuple[str, ...] = ()

    @property
    def tls(self) -> bool:
        return self.tls_server_mode != "disabled"

    def server_conf(self, work: Path) -> dict[str, str]:
        """broker.conf entries for a standalone in this mode (files it needs go to ``work``)."""
        conf: dict[str, str] = {}
        if self.acl and self.acl_version == 2:
            admin = json.dumps({"username": ADMIN[0], "password": ADMIN[1]})
            auth = "org.apache.rocketmq.auth"
            conf.update(authenticationEnabled="true", authorizationEnabled="true", initAuthenticationUser=admin,
                        authenticationProvider=f"{auth}.authentication.provider.DefaultAuthenticationProvider",
                        authenticationMetadataProvider=f"{auth}.authentication.provider.LocalAuthenticationMetadataProvider",
                        authorizationProvider=f"{auth}.authorization.provider.DefaultAuthorizationProvider",
                        authorizationMetadataProvider=f"{auth}.authorization.provider.LocalAuthorizationMetadataProvider")
        elif self.acl:
            acl_file = work / "plain_acl.yml"
            acl_file.write_text(PLAIN_ACL_YML)
            conf.update(aclEnable="true", aclFilePath=str(acl_file))
        if self.tls:
            conf["tls.server.mode"] = self.tls_server_mode
            conf["tls.enable"] = "true"  # the broker's registration with the name server
        return conf

    def cell_params(self, scenario_key: str) -> dict:
        """What every cell of this mode is given unless its scenario says otherwise."""
        out: dict = {}
        if self.acl:
            out["acl"] = keys(ADMIN if scenario_key in ADMIN_SCENARIOS else USER)
        if self.tls:
            out["tls"] = True
        return out


BASICS = ("sync_send", "async_send", "batch_send", "cluster_consume", "tag_filter", "orderly", "retry", "tx_commit",
          "query_key", "admin_topic", "lite_pull")
MODES = {
    "plain": Mode("plain"),
    "acl": Mode("acl", acl=True, scenarios=(*BASICS, "acl_wrong_secret", "acl_unknown_key", "acl_no_credentials",
                                            "acl_no_permission")),
    "acl2": Mode("acl2", acl=True, acl_version=2,
                  scenarios=(*BASICS, "acl_wrong_secret", "acl_unknown_key", "acl_no_credentials", "acl_no_permission")),
    "tls": Mode("tls", tls_server_mode="enforcing", scenarios=(*BASICS, "tls_plain_client")),
    "tls-permissive": Mode("tls-permissive", tls_server_mode="permissive", scenarios=(*BASICS, "tls_plain_client")),
}


def acl2_bodies() -> list[tuple[str, dict[str, str], dict]]:
    """(what, header fields, JSON body) of the AUTH_CREATE_USER and AUTH_CREATE_ACL requests that make
    the ``acl2`` mode's Normal users, as mqadmin 5.x's createUser and createAcl send them."""
    out: list[tuple[str, dict[str, str], dict]] = []
    for (name, secret), policies in ACL2_POLICIES.items():
        out.append(("user", {"username": name}, {"password": secret, "userType": "Normal", "username": name}))
        entries = [{"actions": actions, "decision": "Allow", "resource": resource} for resource, actions in policies.items()]
        out.append(("acl", {"subject": f"User:{name}"}, {"policies": [{"entries": entries}], "subject": f"User:{name}"}))
    return out
