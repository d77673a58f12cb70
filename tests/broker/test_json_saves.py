"""Config files written in bursts: one write per burst, the newest content last."""

from __future__ import annotations

import tempfile
from pathlib import Path

from twisted.internet import defer
from twisted.trial import unittest

from rmqtx.broker.jsonfiles import JsonConfigFile, loads_fastjson


class SaveLatestTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.file = JsonConfigFile(Path(self.dir.name) / "config" / "topics.json")
        self.state = {"topics": []}
        self.renders = 0

    def render(self) -> dict:
        self.renders += 1
        return {"topics": list(self.state["topics"])}

    async def _burst(self) -> None:
        saves = []
        for i in range(200):  # as 200 UPDATE_AND_CREATE_TOPIC in a row
            self.state["topics"].append(f"T{i}")
            saves.append(self.file.save_latest(self.render))
        await defer.gatherResults(saves)
        await self.file.drain()
        self.assertEqual(loads_fastjson(self.file.path.read_bytes()), {"topics": [f"T{i}" for i in range(200)]})
        self.assertLessEqual(self.renders, 2)  # the first change's write, then one for all the others
        # later changes are saved too, once the burst's write is over
        self.state["topics"].append("late")
        await self.file.save_latest(self.render)
        self.assertEqual(loads_fastjson(self.file.path.read_bytes())["topics"][-1], "late")

    def test_burst_shares_one_write(self):
        return defer.ensureDeferred(self._burst())
