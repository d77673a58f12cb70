"""A SparkSession for reading stores: loopback-only, quiet, workers on this Python, sources registered."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# PySpark starts as a "shell", whose level comes from its gateway's logger: keep it at error too.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


class JavaNotFoundError(RuntimeError):
    """PySpark runs its engine in a JVM; without one nothing can start."""


def find_java() -> str:
    """The java binary Spark will use ($JAVA_HOME first, as spark-submit does)."""
    home = os.environ.get("JAVA_HOME")
    candidate = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if candidate and os.access(candidate, os.X_OK):
        return candidate
    raise JavaNotFoundError(
        "Spark needs a Java runtime (17 or newer) but found none "
        + (f"at $JAVA_HOME={home}" if home else "on PATH and $JAVA_HOME is unset")
        + ". Install one, e.g. with `scripts/ensure-java.sh` (apt-get install openjdk-17-jre-headless).")


def _log_config() -> str:
    path = os.path.join(tempfile.gettempdir(), "rmqtx-spark-log4j2.properties")
    with open(path, "w") as fh:
        fh.write(_LOG4J)
    return path


def build_session(master: str = "local[*]", app_name: str = "rmqtx", progress: bool = False,
                  conf: dict[str, str] | None = None) -> SparkSession:
    """Start (or reuse) a session; local masters bind the driver to 127.0.0.1 only."""
    find_java()
    from pyspark.sql import SparkSession

    from . import register

    local = master.startswith("local")
    if local:
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": str(progress).lower(),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_log_config()}",
    }
    if local:
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
