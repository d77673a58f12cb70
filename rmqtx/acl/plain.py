"""``plain_acl.yml``: accounts, permissions and global white addresses, read and rewritten.

Reading and writing happen off the reactor (``threads.deferToThread``); the rewrite is atomic
(temp file, fsync, rename). Secret keys are held here and never logged.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from rmqtx.acl.addresses import AddressPatternError, Matcher, address_matcher
from rmqtx.common.topics import RETRY_PREFIX

DENY, ANY, PUB, SUB = 1, 2, 4, 8
#: Java's minimum is "longer than 6".
KEY_MIN_LENGTH = 6


class AclConfigError(ValueError):
    """plain_acl.yml (or an ACL admin request) holds something Java refuses."""


def parse_perm(text: object) -> int:
    """``PUB``, ``SUB``, ``PUB|SUB``, ``SUB|PUB``, ``DENY``; anything else denies."""
    if text is None:
        return DENY
    return {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}.get(str(text).strip(), DENY)


def check_perm(needed: int, owned: int) -> bool:
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def _resource_perms(items: Iterable[object] | None, is_topic: bool, into: dict[str, int]) -> None:
    for item in items or []:
        parts = [p for p in str(item).split("=") if p]
        if len(parts) != 2:
            raise AclConfigError(f"Parse resource permission failed for {'topic' if is_topic else 'group'}:{item}")
        name = parts[0].strip()
        into[name if is_topic else RETRY_PREFIX + name] = parse_perm(parts[1])


def check_resource_perms(items: list[str] | None) -> None:
    """What Java checks on an update request's topicPerms/groupPerms."""
    for item in items or []:
        parts = [p for p in item.split("=") if p]
        if len(parts) != 2:
            raise AclConfigError(
                f"Parse Resource format error for {item}.\nThe expected resource format is 'Res=Perm'. For example: topicA=SUB"
            )
        if parts[1].strip() != "DENY" and parse_perm(parts[1]) == DENY:
            raise AclConfigError(
                f"Parse resource permission error for {item}.\nThe expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."
            )


@dataclass
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    white: Matcher
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int]

    @classmethod
    def from_yaml(cls, raw: dict) -> "Account":
        ak, sk = raw.get("accessKey"), raw.get("secretKey")
        if ak is None or sk is None or len(str(ak)) <= KEY_MIN_LENGTH or len(str(sk)) <= KEY_MIN_LENGTH:
            raise AclConfigError(f"The accessKey={ak} and secretKey=****** cannot be null and length should longer than 6")
        perms: dict[str, int] = {}
        _resource_perms(raw.get("groupPerms"), False, perms)
        _resource_perms(raw.get("topicPerms"), True, perms)
        white = raw.get("whiteRemoteAddress")
        try:
            matcher = address_matcher(None if white is None else str(white))
        except AddressPatternError as exc:
            raise AclConfigError(str(exc)) from None
        return cls(
            access_key=str(ak),
            secret_key=str(sk),
            white=matcher,
            admin=raw.get("admin") in (True, "true", "True"),
            default_topic_perm=parse_perm(raw.get("defaultTopicPerm")),
            default_group_perm=parse_perm(raw.get("defaultGroupPerm")),
            perms=perms,
        )


@dataclass
class AclTable:
    """What one load of plain_acl.yml gives the validator."""

    global_white: list[Matcher]
    accounts: dict[str, Account]
    counter: int = 0
    timestamp: int = 0

    @classmethod
    def from_doc(cls, doc: Any) -> "AclTable":
        if doc is None:
            return cls([], {})
        if not isinstance(doc, dict):
            raise AclConfigError("plain_acl.yml is not a mapping")
        try:
            white = [address_matcher(str(a)) for a in doc.get("globalWhiteRemoteAddresses") or []]
        except AddressPatternError as exc:
            raise AclConfigError(str(exc)) from None
        accounts: dict[str, Account] = {}
        for raw in doc.get("accounts") or []:
            if not isinstance(raw, dict):
                raise AclConfigError("an entry of accounts is not a mapping")
            account = Account.from_yaml(raw)
            accounts.setdefault(account.access_key, account)  # the first definition wins, as in Java
        counter = timestamp = 0
        versions = doc.get("dataVersion")
        if isinstance(versions, list) and versions and isinstance(versions[0], dict):
            counter = int(versions[0].get("counter") or 0)
            timestamp = int(versions[0].get("timestamp") or 0)
        return cls(white, accounts, counter, timestamp)


def read_doc(path: Path) -> Any:
    """The parsed YAML (``None`` for a missing or empty file). Blocking: call off the reactor."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # Only the problem and where: the YAML error's own text quotes the line, secret key and all.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise AclConfigError(f"{path.name} is not valid YAML{where}: {getattr(exc, 'problem', None) or type(exc).__name__}") from None


def bump_version(doc: dict) -> tuple[int, int]:
    """Next dataVersion in ``doc`` (as Java's updateAclConfigFileVersion)."""
    counter = 0
    versions = doc.get("dataVersion")
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        counter = int(versions[0].get("counter") or 0)
    counter += 1
    stamp = int(time.time() * 1000)
    doc["dataVersion"] = [{"counter": counter, "timestamp": stamp}]
    return counter, stamp


def write_doc(path: Path, doc: dict) -> None:
    """Atomic rewrite: temp file in the same directory, fsync, rename. Blocking: call off the reactor."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".plain_acl.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yaml.safe_dump(doc, out, default_flow_style=False, sort_keys=False, allow_unicode=True)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
