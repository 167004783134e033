"""Per-node flow counts: the per-hop view of one monitored flow, block by block."""

# S608: the queries are constant templates; Grafana, not this code, fills in the values.
# ruff: noqa: S608

from __future__ import annotations

from grafana_foundation_sdk.builders.dashboard import Dashboard
from srv6pm.dashboards import panels as p

UID = "srv6pm-flows"
TITLE = "srv6pm / Per-node flow counts"

# Regex match: Grafana interpolates InfluxQL variables in regex format (see fleet.py).
_FLOW = '"flow" =~ /^$flow$/'
_NODE_LINES = '"role", "node"'


def build() -> Dashboard:
    return (
        p.dashboard(
            UID,
            TITLE,
            "Packets and bytes of one monitored flow counted by every node on its path "
            "(ingress, transit, egress) in each block. Loss between nodes A and B in block k "
            "is packets(A) - packets(B).",
        )
        .with_variable(p.variable("flow", "Flow", p.tag_values("flow", "flow")))
        .with_row(p.row("Counts per node"))
        .with_panel(
            p.timeseries(
                "Packets per node per block",
                "One line per node; a gap between two nodes' lines is the packets lost between "
                "them in that block.",
                p.COUNT,
                [
                    p.target(
                        'SELECT "packets" FROM "flow" '
                        f'WHERE $timeFilter AND {_FLOW} AND "valid" = true GROUP BY {_NODE_LINES}',
                        alias="$tag_role $tag_node",
                    )
                ],
            )
        )
        .with_panel(
            p.timeseries(
                "Bytes per node per block",
                "Bytes of the flow counted by each node in each block.",
                p.BYTES,
                [
                    p.target(
                        'SELECT "bytes" FROM "flow" '
                        f'WHERE $timeFilter AND {_FLOW} AND "valid" = true GROUP BY {_NODE_LINES}',
                        alias="$tag_role $tag_node",
                    )
                ],
            )
        )
        .with_panel(
            p.timeseries(
                "Path loss per block",
                "Largest minus smallest count among the nodes in each block, i.e. ingress - "
                "egress when counts only fall along the path. All nodes stamp a block with its "
                "start time, so 1 ms buckets hold exactly one block each.",
                p.COUNT,
                [
                    p.target(
                        'SELECT spread("packets") AS "lost" FROM "flow" '
                        f'WHERE $timeFilter AND {_FLOW} AND "valid" = true '
                        "GROUP BY time(1ms) fill(none)",
                        alias="lost",
                    )
                ],
                bars=True,
                width=24,
            )
        )
        .with_panel(
            p.table(
                "Packets per block and node",
                "The per-hop view: one row per block, one column per node (newest blocks first).",
                [
                    p.target(
                        'SELECT "block", "node", "packets" FROM "flow" '
                        f'WHERE $timeFilter AND {_FLOW} AND "valid" = true '
                        "ORDER BY time DESC LIMIT 2000",
                        table=True,
                    )
                ],
                transformations=[p.matrix("block", "node", "packets"), p.sort_by("block\\node")],
                width=24,
                height=10,
            )
        )
        .with_panel(
            p.table(
                "Latest counts per node",
                "Each node's most recent valid block for this flow.",
                [
                    p.target(
                        'SELECT last("block") AS "block", last("packets") AS "packets", '
                        'last("bytes") AS "bytes", last("flow_mon_id") AS "flow_mon_id" '
                        f'FROM "flow" WHERE $timeFilter AND {_FLOW} AND "valid" = true '
                        f"GROUP BY {_NODE_LINES}",
                        table=True,
                    )
                ],
                transformations=[p.hide_time()],
                units={"bytes": p.BYTES},
            )
        )
        .with_panel(
            p.table(
                "Invalid flow counts",
                "Blocks a node could not count for this flow, newest first, with the reason.",
                [
                    p.target(
                        'SELECT "node", "role", "block", "reason" FROM "flow" '
                        f'WHERE $timeFilter AND {_FLOW} AND "valid" = false '
                        "ORDER BY time DESC LIMIT 500",
                        table=True,
                    )
                ],
            )
        )
    )
