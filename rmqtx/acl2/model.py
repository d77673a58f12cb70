"""ACL 2.0's records as Apache 5.3+ keeps them (decisions as 5.4.0 makes them): users, and ACLs of policies of entries.

Names are Apache's (``Topic:name``, ``Pub``, ``Allow``, ``Super``, ``enable``); the stored form is the
JSON Apache's local metadata providers put in RocksDB (enums as their codes); the wire form is the
admin bodies ``UserInfo`` and ``AclInfo`` (enums as their names). Matching follows Apache's
AclAuthorizationHandler, including the order its comparator gives the matched entries.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

# -- enums: name -> code (Apache's @JSONField(value=true) codes) ---------------------------------------
SUPER, NORMAL = "Super", "Normal"
USER_TYPES = {SUPER: 1, NORMAL: 2}
ENABLE, DISABLE = "enable", "disable"
USER_STATUSES = {ENABLE: 1, DISABLE: 2}
CUSTOM, DEFAULT = "Custom", "Default"
POLICY_TYPES = {CUSTOM: 1, DEFAULT: 2}
ALLOW, DENY = "Allow", "Deny"
DECISIONS = {ALLOW: 1, DENY: 2}
ACTIONS = {"Unknown": 0, "All": 1, "Any": 2, "Pub": 3, "Sub": 4, "Create": 5, "Update": 6, "Delete": 7, "Get": 8, "List": 9}
RESOURCE_TYPES = {"Unknown": 0, "Any": 1, "Cluster": 2, "Namespace": 3, "Topic": 4, "Group": 5}
PATTERN_ANY, LITERAL, PREFIXED = 1, 2, 3
USER_PREFIX = "User:"
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"


def by_name(table: dict[str, int], name: str | None) -> str | None:
    """Apache's ``getByName``: case-insensitive, ``None`` when unknown."""
    if name is None:
        return None
    low = name.lower()
    for key in table:
        if key.lower() == low:
            return key
    return None


def by_code(table: dict[str, int], code: object) -> str | None:
    for key, value in table.items():
        if value == code:
            return key
    return None


# -- resources ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Resource:
    """``kind`` is a RESOURCE_TYPES name; ``name`` is None for the any-patterns."""

    kind: str
    name: str | None
    pattern: int

    @classmethod
    def topic(cls, name: str | None) -> "Resource":
        return cls("Topic", name, LITERAL)

    @classmethod
    def group(cls, name: str | None) -> "Resource":
        """A group; a %RETRY%/%DLQ% topic names its group (Apache's Resource.ofGroup)."""
        if name is not None and name.startswith(RETRY_PREFIX):
            name = without_retry_and_dlq(name)
        return cls("Group", name, LITERAL)

    @classmethod
    def cluster(cls, name: str | None) -> "Resource":
        return cls("Cluster", name, LITERAL)

    @classmethod
    def parse(cls, key: str | None) -> "Resource | None":
        """``*``, ``Type:*``, ``Type:prefix*`` or ``Type:name``; None for blank or an unknown type."""
        if key is None or not key.strip():
            return None
        if key == "*":
            return cls("Any", None, PATTERN_ANY)
        type_text, _, rest = key.partition(":")
        kind = by_name(RESOURCE_TYPES, type_text)
        if kind is None:
            return None
        name = rest if ":" in key else ""
        if name == "*":
            return cls(kind, None, PATTERN_ANY)
        if name.endswith("*"):
            return cls(kind, name[: name.index("*")], PREFIXED)
        return cls(kind, name, LITERAL)

    @property
    def key(self) -> str:
        if self.kind == "Any":
            return "*"
        if self.pattern == PATTERN_ANY:
            return f"{self.kind}:*"
        if self.pattern == PREFIXED:
            return f"{self.kind}:{self.name}*"
        return f"{self.kind}:{self.name}"

    def matches(self, wanted: "Resource") -> bool:
        if self.kind == "Any":
            return True
        if self.kind != wanted.kind:
            return False
        if self.pattern == PATTERN_ANY:
            return True
        if self.pattern == LITERAL:
            return wanted.name == self.name
        return wanted.name is not None and self.name is not None and wanted.name.startswith(self.name)

    def stored(self) -> dict[str, Any]:
        out: dict[str, Any] = {"resourcePattern": self.pattern, "resourceType": RESOURCE_TYPES[self.kind]}
        if self.name is not None:
            out["resourceName"] = self.name
        return out

    @classmethod
    def from_stored(cls, doc: dict[str, Any]) -> "Resource":
        return cls(by_code(RESOURCE_TYPES, doc.get("resourceType")) or "Unknown", doc.get("resourceName"),
                   int(doc.get("resourcePattern") or LITERAL))


def without_retry_and_dlq(name: str) -> str:
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def ip_in_range(ip: str, rule: str) -> bool:
    """Apache's IPAddressUtils.isIPInRange: a plain address is compared as text, a CIDR as a range."""
    parts = rule.split("/")
    if len(parts) == 1:
        return ip == rule
    if len(parts) != 2:
        return False
    try:
        net = ipaddress.ip_address(parts[0])
        bits = (4 if net.version == 4 else 16) * 8
        mask = ((1 << bits) - 1) ^ ((1 << (bits - int(parts[1]))) - 1)
        low = int(net) & mask
        return low <= int(ipaddress.ip_address(ip)) <= low + ((1 << bits) - 1 - mask)
    except ValueError:
        return False


def valid_ip_or_cidr(text: str) -> bool:
    try:
        if "/" not in text:
            ipaddress.ip_address(text)
            return True
        addr, _, prefix = text.partition("/")
        net = ipaddress.ip_address(addr)
        return prefix.isdigit() and 0 <= int(prefix) <= (32 if net.version == 4 else 128)
    except ValueError:
        return False


# -- policies ------------------------------------------------------------------------------------------
@dataclass
class Entry:
    resource: Resource | None
    actions: list[str]
    #: None: no environment; else the source IPs or CIDRs (an empty list matches any source)
    source_ips: list[str] | None
    decision: str | None

    def matches(self, resource: Resource, actions: Iterable[str], source_ip: str) -> bool:
        if self.resource is None or not self.resource.matches(resource):
            return False
        wanted = list(actions)
        if not self.actions:
            return False
        if "Any" not in wanted and not any(a in self.actions or "All" in self.actions for a in wanted):
            return False
        if not self.source_ips:
            return True
        return bool(source_ip) and any(ip_in_range(source_ip, rule) for rule in self.source_ips)

    def stored(self) -> dict[str, Any]:
        out: dict[str, Any] = {"actions": [ACTIONS[a] for a in self.actions]}
        if self.decision is not None:
            out["decision"] = DECISIONS[self.decision]
        out["environment"] = {} if self.source_ips is None else {"sourceIps": list(self.source_ips)}
        if self.resource is not None:
            out["resource"] = self.resource.stored()
        return out

    @classmethod
    def from_stored(cls, doc: dict[str, Any]) -> "Entry":
        env = doc.get("environment")
        return cls(
            Resource.from_stored(doc["resource"]) if doc.get("resource") else None,
            [a for a in (by_code(ACTIONS, c) for c in doc.get("actions") or ()) if a is not None],
            None if env is None else list(env.get("sourceIps") or []),
            by_code(DECISIONS, doc.get("decision")),
        )

    def info(self) -> dict[str, Any]:
        """``AclInfo.PolicyEntryInfo`` (keys in fastjson's order)."""
        out: dict[str, Any] = {}
        if self.actions:
            out["actions"] = list(self.actions)
        out["decision"] = self.decision
        if self.resource is not None:
            out["resource"] = self.resource.key
        if self.source_ips:
            out["sourceIps"] = list(self.source_ips)
        return out


@dataclass
class Policy:
    policy_type: str | None
    entries: list[Entry] = field(default_factory=list)

    def update(self, new_entries: list[Entry]) -> None:
        """Apache's Policy.updateEntry: an entry for the same resource is replaced in place, others appended."""
        for new in new_entries:
            old = next((e for e in self.entries if e.resource == new.resource), None)
            if old is None:
                self.entries.append(new)
            else:
                old.actions, old.source_ips, old.decision = new.actions, new.source_ips, new.decision

    def stored(self) -> dict[str, Any]:
        out: dict[str, Any] = {"entries": [e.stored() for e in self.entries]}
        if self.policy_type is not None:
            out["policyType"] = POLICY_TYPES[self.policy_type]
        return out

    @classmethod
    def from_stored(cls, doc: dict[str, Any]) -> "Policy":
        return cls(by_code(POLICY_TYPES, doc.get("policyType")), [Entry.from_stored(e) for e in doc.get("entries") or ()])

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.entries:
            out["entries"] = [e.info() for e in self.entries]
        if self.policy_type is not None:
            out["policyType"] = self.policy_type
        return out


@dataclass
class Acl:
    subject: str  # "User:name"
    policies: list[Policy] = field(default_factory=list)

    def policy(self, policy_type: str) -> Policy | None:
        return next((p for p in self.policies if p.policy_type == policy_type), None)

    def update(self, policies: list[Policy]) -> None:
        for new in policies:
            old = self.policy(new.policy_type or CUSTOM)
            if old is None:
                self.policies.append(new)
            else:
                old.update(new.entries)

    def delete(self, policy_type: str, resource: Resource) -> None:
        policy = self.policy(policy_type)
        if policy is None:
            return
        for i, entry in enumerate(policy.entries):
            if entry.resource == resource:
                del policy.entries[i]
                break
        if not policy.entries:
            self.policies.remove(policy)

    def stored(self) -> dict[str, Any]:
        return {"policies": [p.stored() for p in self.policies],
                "subject": {"subjectType": 1, "username": self.subject[len(USER_PREFIX):]}}

    @classmethod
    def from_stored(cls, subject: str, doc: dict[str, Any]) -> "Acl":
        return cls(subject, [Policy.from_stored(p) for p in doc.get("policies") or ()])

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.policies:
            out["policies"] = [p.info() for p in self.policies]
        out["subject"] = self.subject
        return out

    def decide(self, resource: Resource, actions: list[str], source_ip: str) -> Entry | None:
        """The entry Apache's AclAuthorizationHandler settles on: Custom's matches, else Default's, first
        in the order of its comparator (applied with Java's small-list sort)."""
        matched: list[Entry] = []
        for policy_type in (CUSTOM, DEFAULT):
            policy = self.policy(policy_type)
            if policy is not None:
                matched = [e for e in policy.entries if e.matches(resource, actions, source_ip)]
            if matched:
                break
        if not matched:
            return None
        java_sort(matched, _compare_entries)
        return matched[0]


def _compare_entries(o1: Entry, o2: Entry) -> int:
    """Apache 5.4's entry comparator (fixed after 5.3.3): a typed resource before ``*``; literal before
    prefixed before any-name; the longer prefix first; then Allow before Deny (its tie-break, as written)."""
    r1, r2 = o1.resource, o2.resource
    assert r1 is not None and r2 is not None
    compare = 0
    if r1.kind != r2.kind:
        if r1.kind == "Any":
            compare = 1
        if r2.kind == "Any":
            compare = -1
    elif r1.pattern == r2.pattern:
        if r1.pattern == PREFIXED:
            n1, n2 = len(r1.name or ""), len(r2.name or "")
            compare = (n1 < n2) - (n1 > n2)
    elif r1.pattern == LITERAL:
        compare = -1
    elif r2.pattern == LITERAL:
        compare = 1
    elif r1.pattern == PREFIXED:
        compare = -1
    elif r2.pattern == PREFIXED:
        compare = 1
    if compare:
        return compare
    return 1 if o1.decision == DENY else -1 if o2.decision == DENY else 0


def java_sort(items: list, compare: Callable[[Any, Any], int]) -> None:
    """Java's TimSort on a short list (a run, then binary insertion): the same order Java gives, even
    for a comparator that is not consistent."""
    hi = len(items)
    if hi < 2:
        return
    run = 1
    if compare(items[1], items[0]) < 0:
        run = 2
        while run < hi and compare(items[run], items[run - 1]) < 0:
            run += 1
        items[:run] = items[:run][::-1]
    else:
        run = 2
        while run < hi and compare(items[run], items[run - 1]) >= 0:
            run += 1
    for start in range(run, hi):
        pivot = items[start]
        left, right = 0, start
        while left < right:
            mid = (left + right) >> 1
            if compare(pivot, items[mid]) < 0:
                right = mid
            else:
                left = mid + 1
        items[left + 1:start + 1] = items[left:start]
        items[left] = pivot


# -- users ---------------------------------------------------------------------------------------------
@dataclass
class User:
    username: str
    password: str | None = None
    user_type: str | None = None
    status: str | None = None

    def stored(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.password is not None:
            out["password"] = self.password
        out["subjectKey"] = USER_PREFIX + self.username
        out["subjectType"] = 1
        if self.status is not None:
            out["userStatus"] = USER_STATUSES[self.status]
        if self.user_type is not None:
            out["userType"] = USER_TYPES[self.user_type]
        out["username"] = self.username
        return out

    @classmethod
    def from_stored(cls, doc: dict[str, Any]) -> "User":
        return cls(str(doc.get("username")), doc.get("password"), by_code(USER_TYPES, doc.get("userType")),
                   by_code(USER_STATUSES, doc.get("userStatus")))

    def info(self) -> dict[str, Any]:
        """``UserInfo`` (fastjson's key order; absent values left out)."""
        out: dict[str, Any] = {}
        if self.password is not None:
            out["password"] = self.password
        if self.status is not None:
            out["userStatus"] = self.status
        if self.user_type is not None:
            out["userType"] = self.user_type
        out["username"] = self.username
        return out

    def __repr__(self) -> str:  # never the password
        return f"User({self.username!r}, {self.user_type}, {self.status})"
