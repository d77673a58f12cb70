"""A real NameServer + Broker per test, and rmqadmin run in-process against them."""

from __future__ import annotations

import io

from rmqtx.remoting import RemotingClient, RemotingCommand
from rmqtx.tools.cli import run
from tests.client.support import ClusterTestCase, wait_until


class AdminTestCase(ClusterTestCase):
    async def rmqadmin(self, *argv: str) -> tuple[int, str, str]:
        """Run one rmqadmin subcommand against this test's name server: (exit code, stdout, stderr)."""
        out, err = io.StringIO(), io.StringIO()
        code = await run([*argv, "-n", self.cluster.namesrv_addr], out, err)
        return code, out.getvalue(), err.getvalue()

    async def until_routed(self, topic: str) -> None:
        """Wait until the broker's oneway re-registration has put ``topic`` on the name server."""
        await wait_until(lambda: topic in self.cluster.namesrv.route_info.topic_queue_table, timeout=10)

    async def ok(self, *argv: str) -> str:
        code, out, err = await self.rmqadmin(*argv)
        self.assertEqual(code, 0, err)
        return out

    async def broker_call(self, code: int, fields: dict | None = None, body: bytes = b"", timeout: float = 5) -> RemotingCommand:
        client = RemotingClient()
        try:
            return await client.invoke(self.cluster.broker_addr, RemotingCommand.request(code, fields, body), timeout)
        finally:
            await client.close()
