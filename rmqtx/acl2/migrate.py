"""``migrateAuthFromV1Enabled=true``: ACL 1.0's accounts made ACL 2.0 users and ACLs at start, as Apache
5.3's AuthMigrator does.

Read: every ``*.yml`` under ``$ROCKETMQ_HOME/conf/acl`` and the plain_acl.yml rmqtx's ACL 1.0 reads
(``aclFilePath``, else ``$ROCKETMQ_HOME/conf/plain_acl.yml``). Each account whose access key is not a
user yet becomes one (admin -> Super, else Normal; the secret key as password); its topicPerms and
groupPerms become a Custom policy (``name=PERM``: PUB -> Pub, SUB -> Sub, PUB|SUB -> Pub+Sub, DENY or
anything else -> All; Deny for DENY, else Allow), its defaultTopicPerm / defaultGroupPerm a Default
policy on ``Topic:*`` / ``Group:*``. White addresses are not carried over (ACL 2.0 has none per user).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from rmqtx.acl.plain import read_doc
from rmqtx.acl2.model import ALLOW, CUSTOM, DEFAULT, DENY, ENABLE, NORMAL, PATTERN_ANY, SUPER, Acl, Entry, Policy, Resource, User


def v1_files(acl_file: Path) -> list[Path]:
    home = os.environ.get("ROCKETMQ_HOME")
    files: list[Path] = []
    if home:
        acl_dir = Path(home) / "conf" / "acl"
        if acl_dir.is_dir():
            files += sorted(p for p in acl_dir.rglob("*.yml") if p.name != "tools.yml")
    if acl_file.exists() and acl_file not in files:
        files.append(acl_file)
    return files


def _actions(perm: str) -> list[str]:
    return {"PUB": ["Pub"], "SUB": ["Sub"], "PUB|SUB": ["Pub", "Sub"], "SUB|PUB": ["Pub", "Sub"]}.get(perm.strip(), ["All"])


def _decision(perm: str) -> str:
    return DENY if not perm.strip() or perm.strip() == "DENY" else ALLOW


def _entries(perms: Any, group: bool) -> list[Entry]:
    out = []
    for item in perms or ():
        parts = [p for p in str(item).split("=") if p]
        if len(parts) != 2:
            continue
        name, perm = parts[0].strip(), parts[1].strip()
        out.append(Entry(Resource.group(name) if group else Resource.topic(name), _actions(perm), None, _decision(perm)))
    return out


def accounts(files: Iterable[Path]) -> list[dict]:
    found = []
    for path in files:
        doc = read_doc(path)
        if isinstance(doc, dict) and isinstance(doc.get("accounts"), list):
            found += [a for a in doc["accounts"] if isinstance(a, dict) and a.get("accessKey")]
    return found


def migrate(users: dict[str, User], acls: dict[str, Acl], found: list[dict]) -> list[str]:
    """Add the accounts that are not users yet to ``users`` and ``acls``; the names added."""
    added = []
    for account in found:
        name, secret = str(account["accessKey"]), account.get("secretKey")
        if name in users or secret is None or not str(secret).strip():
            continue  # existing users are kept; Apache's manager refuses a blank password
        admin = str(account.get("admin", "false")).strip().lower() == "true"
        users[name] = User(name, str(secret), SUPER if admin else NORMAL, ENABLE)
        added.append(name)
        policies = []
        custom = _entries(account.get("topicPerms"), False) + _entries(account.get("groupPerms"), True)
        if custom:
            policies.append(Policy(CUSTOM, custom))
        defaults = []
        for key, kind in (("defaultTopicPerm", "Topic"), ("defaultGroupPerm", "Group")):
            perm = account.get(key)
            if perm is not None and str(perm).strip():
                defaults.append(Entry(Resource(kind, None, PATTERN_ANY), _actions(str(perm)), None, _decision(str(perm))))
        if defaults:
            policies.append(Policy(DEFAULT, defaults))
        if policies:
            subject = "User:" + name
            old = acls.get(subject)
            if old is None:
                acls[subject] = Acl(subject, policies)
            else:
                old.update(policies)
    return added
