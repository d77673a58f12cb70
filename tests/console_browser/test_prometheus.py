"""A real Prometheus (Debian's package) scrapes rmqtx's /metrics on loopback; series of rocketmq-exporter's names
and of Apache 5.x's OpenTelemetry names are read back (trial-only)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request
from pathlib import Path

from tests.console.support import console_server, post_json
from testkit.ports import free_port

SCRAPE_CONFIG = """\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: rmqtx
    metrics_path: /metrics
    static_configs:
      - targets: ["{target}"]
"""


class PrometheusScrapeTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = console_server(admin=True).start()
        self.tmp = tempfile.TemporaryDirectory(prefix="rmqtx-prometheus-")
        self.prometheus: subprocess.Popen | None = None

    def tearDown(self) -> None:
        if self.prometheus is not None and self.prometheus.poll() is None:
            self.prometheus.send_signal(signal.SIGTERM)
            try:
                self.prometheus.wait(15)
            except subprocess.TimeoutExpired:
                self.prometheus.kill()
                self.prometheus.wait()
        clean = self.server.stop()
        log = self.server.log()
        self.server.close()
        self.tmp.cleanup()
        self.assertTrue(clean, f"standalone did not shut down cleanly\n{log}")

    def _query(self, port: int, promql: str) -> list[dict]:
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                answer = json.loads(response.read())
        except OSError:
            return []
        self.assertEqual(answer["status"], "success", answer)
        return answer["data"]["result"]

    def _wait_for(self, port: int, promql: str, want: str, timeout: float = 60.0) -> list[dict]:
        """Until the query's first series reads ``want`` (Prometheus scrapes every second)."""
        deadline = time.time() + timeout
        result: list[dict] = []
        while time.time() < deadline:
            if self.prometheus is not None and self.prometheus.poll() is not None:
                raise AssertionError(f"prometheus exited:\n{Path(self.tmp.name, 'prometheus.log').read_text()[-3000:]}")
            result = self._query(port, promql)
            if result and result[0]["value"][1] == want:
                return result
            time.sleep(0.2)
        raise AssertionError(f"{promql} never read {want}: last {result}")

    def test_prometheus_scrapes_and_answers(self) -> None:
        binary = shutil.which("prometheus")
        self.assertIsNotNone(binary, "no prometheus on PATH: run scripts/ensure-console.sh")
        self.assertEqual(post_json(self.server.console, "topic", {"topic": "PromT", "readQueueNums": 2, "writeQueueNums": 2})[0], 200)
        root = Path(self.tmp.name)
        target = self.server.console.removeprefix("http://")
        (root / "prometheus.yml").write_text(SCRAPE_CONFIG.format(target=target))
        port = free_port()
        with open(root / "prometheus.log", "wb") as log:
            self.prometheus = subprocess.Popen(
                [binary, f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=log, stderr=subprocess.STDOUT, cwd=root,
            )
        self._wait_for(port, 'up{job="rmqtx"}', "1")
        # Sent once Prometheus scrapes: the TPS gauge covers the last minute, and a slow start could outlast it.
        for i in range(3):
            self.server.send_to_queue("PromT", i % 2, f"p{i}")
        series = self._wait_for(port, 'rocketmq_producer_offset{topic="PromT"}', "3")
        self.assertEqual((series[0]["metric"]["cluster"], series[0]["metric"]["broker"]), ("DefaultCluster", "broker-a"))
        tps = self._wait_for(port, 'rocketmq_producer_tps{topic="PromT"}', f"{3 / 60}")
        self.assertEqual(tps[0]["metric"]["topic"], "PromT")
        # Apache 5.x's OpenTelemetry names beside them, as dashboards written for a 5.x broker query them
        sent = self._wait_for(port, 'rocketmq_messages_in_total{topic="PromT",message_type="normal"}', "3")
        labels = sent[0]["metric"]
        self.assertEqual({k: labels.get(k) for k in ("cluster", "node_type", "node_id", "is_system", "otel_scope_name")},
                         {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a", "is_system": "false",
                          "otel_scope_name": "broker-meter"})
        self._wait_for(port, 'sum by (topic) (rocketmq_message_size_bucket{topic="PromT",le=~"1024(\\\\.0)?"})', "3")
        wrote = self._query(port, 'rocketmq_throughput_in_total{topic="PromT"}')
        self.assertGreater(float(wrote[0]["value"][1]), 3 * 100)
        self.assertEqual(self._query(port, "rocketmq_broker_permission")[0]["value"][1], "6")
        runtime = self._query(port, "rocketmq_brokeruntime_commitlog_disk_ratio")
        self.assertEqual(runtime[0]["metric"]["des"], "V4_9_8")
        self.assertTrue(0 < float(runtime[0]["value"][1]) < 1)
        self.assertGreater(float(self._query(port, 'process_resident_memory_bytes{job="rmqtx"}')[0]["value"][1]), 0)


if __name__ == "__main__":
    unittest.main()
