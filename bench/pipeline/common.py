"""Settings shared by the phases of bench/results_pipeline.py."""

from __future__ import annotations

TELEGRAF_VERSION = "1.39.3"  # bench/install-telegraf.sh
PARTITIONS = 3  # as srv6pm.lab.pipeline's records topic
RETENTION_POLICY, RETENTION = "thirty_days", "30d"  # as srv6pm.lab.pipeline's database
PERIOD_NS = 10_000_000_000  # the node manager's default block
BATCH_RECORDS = 5000  # the collector's default batch_size, used by the breakdown as well
SINGLE_COMMITS = 200

# The node manager's publisher (node_manager/adapters/kafka.py): the records on the topic are
# batched and compressed as a node sends them, and the collector pays for decompressing them.
NODE_PRODUCER = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 20,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 40_000,
}
