"""The report's SparkSession, set up for small local jobs on a 2-core machine and kept quiet.

The JVM's own output (its startup warnings, log4j) goes to a log file, not the terminal: a
report prints its progress, not Spark's. Errors still reach Python as exceptions.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"
APP_NAME = "raygroups-report"

# log4j2 at ERROR, to stderr (which is the log file): no INFO/WARN chatter, and no "Using Spark's
# default log4j profile" line, which Spark prints only when it finds no configuration.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
"""


def spark_settings(master: str, log4j_path: Path) -> dict[str, str]:
    """Configuration for jobs over a few million rows: few shuffle partitions, no UI, UTC."""
    java_options = f"-Dlog4j2.configurationFile={log4j_path.as_uri()}"
    settings = {
        # The aggregates are small: 200 shuffle partitions would be 200 tiny tasks per stage; one
        # per core of local[2] is what a million rows need.
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Only the driver: on a cluster the file is not on the workers, whose logs are not ours.
        "spark.driver.extraJavaOptions": java_options,
    }
    if master.startswith("local"):
        # Local only: a cluster's driver memory and address are its operator's business. The JVM
        # lives for one report: C2-compiling hot code would cost more than it saves (C1 only is
        # about 10% faster end to end on a million rows).
        settings["spark.driver.extraJavaOptions"] += " -XX:TieredStopAtLevel=1"
        settings["spark.driver.memory"] = "2g"
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    return settings


@contextlib.contextmanager
def report_session(master: str | None, log_path: Path) -> Iterator[SparkSession]:
    """A SparkSession for one report, stopped at the end.

    A SparkContext already running in this process (a notebook, a test) is used as it is and left
    running: stopping it would pull it from under its owner.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    with _quiet_python_logger():
        active = SparkContext._active_spark_context
        if active is not None:
            spark = SparkSession.builder.getOrCreate()
            spark.conf.set("spark.sql.session.timeZone", "UTC")
            yield spark
            return
        with _new_session(master or DEFAULT_MASTER, log_path) as spark:
            yield spark


@contextlib.contextmanager
def _new_session(master: str, log_path: Path) -> Iterator[SparkSession]:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    log_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="raygroups-report-") as tmp:
        log4j = Path(tmp) / "log4j2.properties"
        log4j.write_text(_LOG4J2)
        conf = SparkConf().setMaster(master).setAppName(APP_NAME).setAll(list(spark_settings(master, log4j).items()))
        context = SparkContext(conf=conf, gateway=_gateway(conf, log_path))
        try:
            context.setLogLevel("ERROR")
            yield SparkSession(context)
        finally:
            context.stop()


@contextlib.contextmanager
def _quiet_python_logger() -> Iterator[None]:
    """pyspark logs every failed query as a JSON blob on stderr before raising it: the exception
    says it all."""
    from pyspark.logger import PySparkLogger

    # Made by pyspark's own factory: pyspark calls it with keyword arguments a plain Logger refuses.
    loggers = [PySparkLogger.getLogger(name) for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _gateway(conf: object, log_path: Path) -> object | None:
    """Start the JVM with its stdout/stderr in `log_path`; None when a JVM is already up."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return None  # a JVM from an earlier report in this process: Spark reuses it
    with open(log_path, "wb") as log:
        # The child keeps its own copies of the descriptor; ours can close.
        return launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
