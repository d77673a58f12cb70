"""Where ACL 2.0 keeps users and ACLs (Apache's RocksDB databases), on real standalones: the JSON files
of rmqtx before are imported once; such files beside the databases, and a missing ``rocksdb`` extra,
stop start-up with one line."""

from __future__ import annotations

import json
import unittest

from rmqtx.remoting.codes import RequestCode, ResponseCode
from tests.ops.support import Scratch
from tests.security.acl_support import raw_call
from tests.security.test_acl2 import AUTH_CONF, SUPER_PW, SUPER_USER, create_topic, request, send_v2
from testkit.standalone import Standalone

#: what rmqtx wrote before: {name: record} and {subject key: record}, Apache's record JSON
OLD_USERS = {"olduser": {"password": "old-pw-1", "subjectKey": "User:olduser", "subjectType": 1, "userStatus": 1,
                         "userType": 2, "username": "olduser"}}
OLD_ACLS = {"User:olduser": {"policies": [{"entries": [{"actions": [3], "decision": 1, "environment": {},
                                                        "resource": {"resourceName": "TopicOld", "resourcePattern": 2,
                                                                     "resourceType": 4}}],
                                           "policyType": 1}],
                             "subject": {"subjectType": 1, "username": "olduser"}}}


def conf_text() -> str:
    return "".join(f"{k}={v}\n" for k, v in AUTH_CONF.items())


class Acl2StoreTest(unittest.TestCase):
    def test_json_files_imported_once_then_refused_beside_the_databases(self) -> None:
        server = Standalone(AUTH_CONF)
        self.addCleanup(server.close)
        config = server.root / "store" / "config"
        config.mkdir(parents=True)
        (config / "users.json").write_text(json.dumps(OLD_USERS, indent=2))
        (config / "acls.json").write_text(json.dumps(OLD_ACLS, indent=2))
        server.start()
        su = (SUPER_USER, SUPER_PW)
        self.assertEqual(raw_call(server.broker, create_topic("TopicOld", su)).code, ResponseCode.SUCCESS)
        self.assertEqual(raw_call(server.broker, send_v2("TopicOld", ("olduser", "old-pw-1"))).code, ResponseCode.SUCCESS)
        denied = raw_call(server.broker, send_v2("TopicOld", ("olduser", "wrong")))
        self.assertEqual((denied.code, denied.remark), (ResponseCode.NO_PERMISSION, "check signature failed."))
        got = raw_call(server.broker, request(RequestCode.AUTH_GET_ACL, {"subject": "User:olduser"}))
        self.assertEqual(json.loads(got.body)["policies"][0]["entries"][0]["resource"], "Topic:TopicOld")
        self.assertTrue(server.stop())
        self.assertEqual(sorted(p.name for p in config.iterdir() if p.name.startswith(("users.", "acls."))),
                         ["acls.json.imported", "users.json.imported"])
        self.assertTrue((config / "users" / "CURRENT").exists() and (config / "acls" / "CURRENT").exists())
        server.start()  # from the databases alone
        self.assertEqual(raw_call(server.broker, send_v2("TopicOld", ("olduser", "old-pw-1"))).code, ResponseCode.SUCCESS)
        self.assertTrue(server.stop())
        self.assertNotIn("Traceback", server.log())

        (config / "users.json").write_text(json.dumps(OLD_USERS))
        scratch = Scratch()
        self.addCleanup(scratch.close)
        proc = scratch.run(scratch.standalone_args("-c", str(server.conf_path), store=str(server.root / "store")))
        self.assertEqual((proc.returncode, proc.stderr),
                         (1, f"rmqtx: cannot start: ACL 2.0 store {config}: both RocksDB (users/, acls/) and users.json "
                             "found; move the one not wanted away\n"))

    def test_without_rocksdict(self) -> None:
        """A ``rocksdict`` that cannot be imported first on the path stands for an install without the extra."""
        scratch = Scratch()
        self.addCleanup(scratch.close)
        shadow = scratch.dir / "shadow"
        shadow.mkdir()
        (shadow / "rocksdict.py").write_text("raise ModuleNotFoundError(\"No module named 'rocksdict'\", name='rocksdict')\n")
        (scratch.dir / "broker.conf").write_text(conf_text())
        proc = scratch.run(scratch.standalone_args("-c", str(scratch.dir / "broker.conf")),
                           prefix=["env", f"PYTHONPATH={shadow}:{scratch_pythonpath()}"])
        self.assertEqual((proc.returncode, proc.stderr),
                         (1, "rmqtx: cannot start: ACL 2.0 (its users and ACLs live in RocksDB) needs the 'rocksdb' "
                             "extra: pip install 'rmqtx[rocksdb]' (No module named 'rocksdict')\n"))
        self.assertFalse((scratch.dir / "store" / "config" / "users").exists())


def scratch_pythonpath() -> str:
    from tests.ops.support import tree_env

    return tree_env()["PYTHONPATH"]


if __name__ == "__main__":
    unittest.main()
