"""ACL 2.0 on the broker's remoting port: the request guard and the admin codes 3001-3010.

The guard is Apache 5.3's request pipeline: authentication first (the AccessKey user, enabled,
with the AclClientRPCHook signature over the sorted ext fields and the body), then authorization
(each (resource, actions) pair from :mod:`rmqtx.acl2.contexts`: Super users pass, others need their
ACL's first matching entry to Allow). A refusal is NO_PERMISSION (16) with Apache's message as the
remark. Unknown request codes are left to the dispatcher's "not supported", as Apache's processor
lookup comes before its pipeline. Passwords are never logged.
"""

from __future__ import annotations

import base64
import hmac
from pathlib import Path
from typing import Any, Callable

import orjson
from twisted.logger import Logger

from rmqtx.acl.signing import ACCESS_KEY, SIGNATURE, UNIQUE_KEY_QUERY, V4_9_3, signed_content
from rmqtx.acl2.contexts import PARSE_ERROR, ParseError, Wanted, wanted
from rmqtx.acl2.model import (
    ACTIONS,
    CUSTOM,
    DECISIONS,
    DENY,
    DISABLE,
    ENABLE,
    NORMAL,
    POLICY_TYPES,
    SUPER,
    USER_PREFIX,
    USER_STATUSES,
    USER_TYPES,
    Acl,
    Entry,
    Policy,
    Resource,
    User,
    by_name,
    valid_ip_or_cidr,
)
from rmqtx.acl2.settings import AuthSettings
from rmqtx.acl2.store import AuthStore
from rmqtx.remoting.bodies import BodyError, json_object, loads_body
from rmqtx.remoting.codes import RequestCode, ResponseCode
from rmqtx.remoting.command import RemotingCommand
from rmqtx.remoting.protocol import RemotingProtocol

log = Logger(namespace="rmqtx.acl2")
_SYSTEM_ERROR_REMARK = "An system error occurred, please try again later."


class Refused(Exception):
    """Apache's AuthenticationException / AuthorizationException: NO_PERMISSION with this message."""


class SystemFailure(Exception):
    """What Apache answers with SYSTEM_ERROR (its processor threw, or a non-auth exception)."""


def _subject(key: str | None) -> str | None:
    """Apache's Subject.of: ``User:name`` (type case-insensitive) -> the canonical key, else None."""
    if key is None:
        return None
    kind, _, name = key.partition(":")
    if kind.lower() != "user":
        return None
    return USER_PREFIX + (name if ":" in key else "")


class AuthService:
    """Users, ACLs, the guard and the admin handlers of one broker."""

    def __init__(self, settings: AuthSettings, directory: Path, cluster: Callable[[], str],
                 processors: dict[int, Any], reactor: Any = None, v1_file: Path | None = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.settings = settings
        self.v1_file = v1_file  # ACL 1.0's plain_acl.yml, read when migrateAuthFromV1Enabled
        self.store = AuthStore(directory, reactor)
        self.cluster = cluster
        self.processors = processors  # the dispatcher's table: codes it does not know are not checked
        #: (host, port) of the broker's own loopback connections (the gRPC endpoint's, whose calls were
        #: checked already): each is let through, consumed at its first request
        self.internal_peers: set[tuple[str, int]] = set()

    # -- start ---------------------------------------------------------------------------------------
    def load(self) -> None:
        """Blocking at start: read the store, add initAuthenticationUser and the inner client's user
        as Super users when absent (as Apache's AuthenticationMetadataManagerImpl does)."""
        self.store.load()
        changed = False
        for entry in (self.settings.init_user, self.settings.inner_credentials):
            if entry is not None and entry[0] not in self.store.users:
                self.store.users[entry[0]] = User(entry[0], entry[1], SUPER, ENABLE)
                changed = True
        if self.settings.migrate_v1 and self.v1_file is not None:
            from rmqtx.acl.plain import AclConfigError
            from rmqtx.acl2.migrate import accounts, migrate, v1_files

            try:
                added = migrate(self.store.users, self.store.acls, accounts(v1_files(self.v1_file)))
            except AclConfigError as exc:
                raise ValueError(f"migrateAuthFromV1Enabled: {exc}") from None
            log.info("ACL 2.0: {n} account(s) migrated from ACL 1.0: {names}", n=len(added), names=", ".join(added))
            changed = changed or bool(added)
        if changed or not (self.store.directory / "users.json").exists():
            self.store.save_now()
        log.info("ACL 2.0: {users} user(s), {acls} ACL(s) in {dir}; authentication {a}, authorization {b}",
                 users=len(self.store.users), acls=len(self.store.acls), dir=str(self.store.directory),
                 a="on" if self.settings.authentication else "off", b="on" if self.settings.authorization else "off")

    # -- the guard -----------------------------------------------------------------------------------
    def guard(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand | None:
        if request.code not in self.processors:
            return None
        host = conn.attributes.get("acl2.host")
        if host is None:
            peer = conn.transport.getPeer()
            host = conn.attributes["acl2.host"] = getattr(peer, "host", "")
            if (host, getattr(peer, "port", 0)) in self.internal_peers:
                self.internal_peers.discard((host, peer.port))
                conn.attributes["acl2.internal"] = True
        if conn.attributes.get("acl2.internal"):
            return None
        try:
            if self.settings.authentication and str(request.code) not in self.settings.authn_whitelist:
                self.authenticate(request)
            if self.settings.authorization and str(request.code) not in self.settings.authz_whitelist:
                self.authorize(request, host)
        except Refused as why:
            log.info("ACL 2.0 refused code {code} from {peer}: {why}", code=request.code, peer=conn.peer, why=str(why))
            return request.make_response(ResponseCode.NO_PERMISSION, str(why))
        return None

    def authenticate(self, request: RemotingCommand) -> None:
        ext = request.ext_fields or {}
        skip = (SIGNATURE, UNIQUE_KEY_QUERY) if request.version <= V4_9_3 else (SIGNATURE,)
        self.check_user(ext.get(ACCESS_KEY), lambda: signed_content(ext, request.body, skip), ext.get(SIGNATURE))

    def check_user(self, username: str | None, content: Callable[[], bytes], signature: str | None) -> None:
        """Apache's DefaultAuthenticationHandler: the user exists and is enabled, and ``signature`` (base64)
        is the HMAC-SHA1 of ``content()`` with the user's password. Shared by remoting and gRPC."""
        if not username:
            raise Refused("username cannot be null.")
        user = self.store.users.get(username)
        if user is None:
            raise Refused(f"User:{username} is not found.")
        if user.status == DISABLE:
            raise Refused(f"User:{username} is disabled.")
        expected = base64.b64encode(hmac.digest((user.password or "").encode("utf-8"), content(), "sha1")).decode("ascii")
        if signature is None or not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "surrogatepass")):
            raise Refused("check signature failed.")

    def authorize(self, request: RemotingCommand, source_ip: str) -> None:
        try:
            pairs = wanted(request, self.cluster())
        except ParseError:
            raise Refused(PARSE_ERROR) from None
        self.check_pairs((request.ext_fields or {}).get(ACCESS_KEY), pairs, source_ip)

    def check_pairs(self, username: str | None, pairs: "list[Wanted]", source_ip: str) -> None:
        """Apache's UserAuthorizationHandler then AclAuthorizationHandler, for each pair in order."""
        for pair in pairs:
            if username is None:
                raise Refused("Authorization failed. Please verify your access rights and try again.")
            user = self.store.users.get(username)
            if user is None:
                raise Refused(f"User:{username} not found.")
            if user.user_type == SUPER:
                continue
            subject = USER_PREFIX + username
            acl = self.store.acls.get(subject)
            entry = acl.decide(pair.resource, list(pair.actions), source_ip) if acl is not None else None
            if entry is None or entry.decision == DENY:
                detail = "no matched policies." if entry is None else "the decision is deny."
                raise Refused(f"{subject} has no permission to access {pair.resource.key} from {source_ip}, {detail}")

    # -- admin codes ----------------------------------------------------------------------------------
    def table_of_handlers(self) -> dict[int, Callable]:
        return {
            RequestCode.AUTH_CREATE_USER: self._wrap(self.create_user),
            RequestCode.AUTH_UPDATE_USER: self._wrap(self.update_user),
            RequestCode.AUTH_DELETE_USER: self._wrap(self.delete_user),
            RequestCode.AUTH_GET_USER: self._wrap(self.get_user),
            RequestCode.AUTH_LIST_USER: self._wrap(self.list_user),
            RequestCode.AUTH_CREATE_ACL: self._wrap(self.create_acl),
            RequestCode.AUTH_UPDATE_ACL: self._wrap(self.create_acl),  # Apache's create and update do the same
            RequestCode.AUTH_DELETE_ACL: self._wrap(self.delete_acl),
            RequestCode.AUTH_GET_ACL: self._wrap(self.get_acl),
            RequestCode.AUTH_LIST_ACL: self._wrap(self.list_acl),
        }

    @staticmethod
    def _wrap(handler: Callable) -> Callable:
        async def run(request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
            try:
                return await handler(request, conn)
            except Refused as why:
                return request.make_response(ResponseCode.NO_PERMISSION, str(why))
            except SystemFailure as why:
                return request.make_response(ResponseCode.SYSTEM_ERROR, str(why))

        return run

    def _not_super_login(self, request: RemotingCommand) -> bool:
        ak = (request.ext_fields or {}).get(ACCESS_KEY)
        if not ak:
            return False
        user = self.store.users.get(ak)
        if user is None:
            raise SystemFailure(f"org.apache.rocketmq.auth.authentication.exception.AuthenticationException: User:{ak} is not found")
        return user.user_type != SUPER

    @staticmethod
    def _body(request: RemotingCommand, what: str) -> dict:
        if not request.body:
            raise SystemFailure("java.lang.NullPointerException")
        try:
            return json_object(request.body, what)
        except BodyError as exc:
            raise SystemFailure(exc.remark) from None

    @staticmethod
    def _user_of(info: dict, username: str) -> User:
        def text(key: str) -> str | None:
            value = info.get(key)
            return None if value is None else str(value)

        return User(username, text("password"), by_name(USER_TYPES, text("userType")), by_name(USER_STATUSES, text("userStatus")))

    @staticmethod
    def _json(doc: Any) -> bytes:
        return orjson.dumps(doc)

    async def create_user(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        name = (request.ext_fields or {}).get("username")
        if not name:
            return request.make_response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = self._user_of(self._body(request, "UserInfo"), name)
        if user.user_type == SUPER and self._not_super_login(request):
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The super user can only be create by super user")
        if not name.strip():
            raise Refused("username can not be blank")
        if not (user.password or "").strip():
            raise Refused("password can not be blank")
        user.user_type = user.user_type or NORMAL
        user.status = user.status or ENABLE
        if name in self.store.users:
            raise Refused("The user is existed")
        self.store.users[name] = user
        await self._save(users=True)
        log.info("ACL 2.0 user {name} created by {peer}", name=name, peer=conn.peer)
        return request.make_response(ResponseCode.SUCCESS)

    async def _save(self, users: bool = False, acls: bool = False) -> None:
        try:
            await self.store.save(users=users, acls=acls)
        except OSError as exc:
            log.error("ACL 2.0 store write failed: {exc}", exc=exc)
            raise Refused("update user to RocksDB failed" if users else "update Acl to RocksDB failed.") from None

    async def update_user(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        name = (request.ext_fields or {}).get("username")
        if not name:
            return request.make_response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = self._user_of(self._body(request, "UserInfo"), name)
        if user.user_type == SUPER and self._not_super_login(request):
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The super user can only be update by super user")
        if not name.strip():
            raise Refused("username can not be blank")
        old = self.store.users.get(name)
        if old is None:
            raise Refused("The user is not exist")
        if old.user_type == SUPER and self._not_super_login(request):
            raise Refused("The super user can only be update by super user")
        if (user.password or "").strip():
            old.password = user.password
        old.user_type = user.user_type or old.user_type
        old.status = user.status or old.status
        await self._save(users=True)
        log.info("ACL 2.0 user {name} updated by {peer}", name=name, peer=conn.peer)
        return request.make_response(ResponseCode.SUCCESS)

    async def delete_user(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        name = (request.ext_fields or {}).get("username")
        if not (name or "").strip():
            raise Refused("username can not be blank")
        assert name is not None
        user = self.store.users.get(name)
        if user is None:
            return request.make_response(ResponseCode.SUCCESS)
        if user.user_type == SUPER and self._not_super_login(request):
            raise Refused("The super user can only be update by super user")
        del self.store.users[name]
        had_acl = self.store.acls.pop(USER_PREFIX + name, None) is not None
        await self._save(users=True, acls=had_acl)
        log.info("ACL 2.0 user {name} deleted by {peer}", name=name, peer=conn.peer)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_user(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        name = (request.ext_fields or {}).get("username")
        if not (name or "").strip():
            return request.make_response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        assert name is not None
        user = self.store.users.get(name)
        return request.make_response(ResponseCode.SUCCESS, body=self._json(user.info()) if user is not None else b"")

    async def list_user(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        flt = (request.ext_fields or {}).get("filter")
        names = [n for n in self.store.user_names() if not (flt and flt.strip()) or flt in n]
        body = self._json([self.store.users[n].info() for n in names]) if names else b""
        return request.make_response(ResponseCode.SUCCESS, body=body)

    def _acl_of(self, info: dict, header_subject: str | None) -> Acl:
        """Apache's AclConverter, then the manager's validation (its messages)."""
        subject = _subject(info.get("subject") if isinstance(info.get("subject"), str) else None) or header_subject
        if subject is None:
            raise SystemFailure(_SYSTEM_ERROR_REMARK)
        policies: list[Policy] = []
        for p in info.get("policies") or ():
            if not isinstance(p, dict):
                raise SystemFailure(_SYSTEM_ERROR_REMARK)
            entries = p.get("entries")
            if not entries:
                continue
            parsed: list[Entry] = []
            for e in entries:
                if not isinstance(e, dict) or not isinstance(e.get("actions"), list):
                    raise SystemFailure(_SYSTEM_ERROR_REMARK)
                actions = [a for a in (by_name(ACTIONS, str(x)) for x in e["actions"]) if a is not None]
                ips = e.get("sourceIps")
                source_ips = [str(ip) if ip is not None else "" for ip in ips] if isinstance(ips, list) and ips else None
                decision = e.get("decision")
                parsed.append(Entry(Resource.parse(e.get("resource")), actions, source_ips,
                                    by_name(DECISIONS, str(decision)) if decision is not None else None))
            policy_type = p.get("policyType")
            policies.append(Policy(by_name(POLICY_TYPES, str(policy_type)) if policy_type is not None else None, parsed))
        if not policies:
            raise Refused("The policies is empty.")
        for policy in policies:
            for entry in policy.entries:
                if entry.resource is None:
                    raise Refused("The resource is null.")
                if not entry.actions:
                    raise Refused("The actions is empty.")
                if "Any" in entry.actions:
                    raise Refused("The actions can not be Any.")
                for ip in entry.source_ips or ():
                    if not ip.strip():
                        raise Refused("The source ip is empty.")
                    if not valid_ip_or_cidr(ip):
                        raise Refused("The source ip is invalid.")
                if entry.decision is None:
                    raise Refused("The decision is null or illegal.")
            policy.policy_type = policy.policy_type or CUSTOM
        return Acl(subject, policies)

    async def create_acl(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        header_subject = _subject((request.ext_fields or {}).get("subject"))
        try:
            info = loads_body(request.body, "AclInfo") if request.body else None
        except BodyError as exc:
            raise SystemFailure(exc.remark) from None
        if not isinstance(info, dict) or not info.get("policies"):
            frame = "createAcl(AdminBrokerProcessor.java:3158)" if request.code == RequestCode.AUTH_CREATE_ACL \
                else "updateAcl(AdminBrokerProcessor.java:3185)"
            raise SystemFailure("org.apache.rocketmq.auth.authorization.exception.AuthorizationException: The body of acl is null,"
                               f" org.apache.rocketmq.broker.processor.AdminBrokerProcessor.{frame}")
        acl = self._acl_of(info, header_subject)
        if acl.subject[len(USER_PREFIX):] not in self.store.users:
            raise Refused(f"The subject of {acl.subject} is not exist.")
        old = self.store.acls.get(acl.subject)
        if old is None:
            self.store.acls[acl.subject] = acl
        else:
            old.update(acl.policies)
        await self._save(acls=True)
        log.info("ACL 2.0 ACL of {subject} changed by {peer}", subject=acl.subject, peer=conn.peer)
        return request.make_response(ResponseCode.SUCCESS)

    async def delete_acl(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        ext = request.ext_fields or {}
        subject = _subject(ext.get("subject"))
        if subject is None:
            raise Refused("The subject is null.")
        policy_type = by_name(POLICY_TYPES, ext.get("policyType")) or CUSTOM
        resource = Resource.parse(ext.get("resource"))
        if subject[len(USER_PREFIX):] not in self.store.users:
            raise Refused("The subject is not exist.")
        acl = self.store.acls.get(subject)
        if acl is None:
            raise Refused("The acl is not exist.")
        if resource is not None:
            acl.delete(policy_type, resource)
        if resource is None or not acl.policies:
            del self.store.acls[subject]
        await self._save(acls=True)
        log.info("ACL 2.0 ACL of {subject} deleted by {peer}", subject=subject, peer=conn.peer)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_acl(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        subject = _subject((request.ext_fields or {}).get("subject"))
        if subject is None:
            raise SystemFailure("java.lang.NullPointerException")
        if subject[len(USER_PREFIX):] not in self.store.users:
            raise Refused("The subject is not exist.")
        acl = self.store.acls.get(subject)
        return request.make_response(ResponseCode.SUCCESS, body=self._json(acl.info()) if acl is not None else b"")

    async def list_acl(self, request: RemotingCommand, conn: RemotingProtocol) -> RemotingCommand:
        ext = request.ext_fields or {}
        subject_filter, resource_filter = ext.get("subjectFilter") or "", ext.get("resourceFilter") or ""
        out = []
        for key in self.store.acl_keys():
            if subject_filter.strip() and subject_filter not in key:
                continue
            acl = self.store.acls[key]
            policies = []
            for policy in acl.policies:
                entries = policy.entries
                if entries and resource_filter.strip() and resource_filter not in key:
                    entries = [e for e in entries if e.resource is not None and resource_filter in e.resource.key]
                    if not entries:
                        continue
                policies.append(Policy(policy.policy_type, entries))
            if policies:
                out.append(Acl(key, policies).info())
        return request.make_response(ResponseCode.SUCCESS, body=self._json(out) if out else b"")
