"""Real Kafka, InfluxDB and PostgreSQL servers for tests, the demo and benchmarks.

``make servers`` (scripts/install-kafka.sh, scripts/install-influxdb.sh) installs Kafka and InfluxDB
into ``${SRV6PM_CACHE:-~/.cache/srv6pm}``; PostgreSQL is Debian's (scripts/install-deps.sh). This
package runs each in a directory the caller owns::

    with KafkaServer(tmp / "kafka") as kafka, InfluxServer(tmp / "influxdb") as influx:
        kafka.create_topic("records", partitions=3, retention_ms=3_600_000)
        influx.create_database("srv6pm", "autogen", "7d")

``stop()`` (graceful) or ``kill()`` (SIGKILL, for fault tests) and ``start()`` again resume on the
same data: topics, committed offsets, points and tables survive. The directory stays the
caller's to remove.

One module per server (:mod:`.kafka`, :mod:`.influxdb`, :mod:`.postgres`, :mod:`.collector`,
:mod:`.controller`), all behind the one runner of :mod:`.runner`; every name is importable from
here, as it was when this was one module.
"""

from __future__ import annotations

from .collector import CollectorProcess
from .controller import ControllerProcess
from .influxdb import INFLUXDB_VERSION, InfluxServer
from .kafka import KAFKA_VERSION_DEFAULT, KafkaServer
from .postgres import POSTGRES_USER, PostgresServer, postgres_bindir
from .runner import LOG_TAIL_LINES, Server, ServerError, cache_dir, free_port, free_ports

_Server = Server  # its name when this was one module (bench/ and kube.py subclass it)

__all__ = [
    "INFLUXDB_VERSION",
    "KAFKA_VERSION_DEFAULT",
    "LOG_TAIL_LINES",
    "POSTGRES_USER",
    "CollectorProcess",
    "ControllerProcess",
    "InfluxServer",
    "KafkaServer",
    "PostgresServer",
    "Server",
    "ServerError",
    "_Server",
    "cache_dir",
    "free_port",
    "free_ports",
    "postgres_bindir",
]
