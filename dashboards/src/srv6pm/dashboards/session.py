"""Per-session detail: one STAMP session's loss, delay, jitter and probes, block by block, one
series per segment list it probes; its delay histogram and the liveness of its segment lists
(an annotation on every time series panel, and a panel of the state); its delay per computation
interval and its delay threshold events (an annotation and a table)."""

# S608: the queries are constant templates; Grafana, not this code, fills in the values.
# ruff: noqa: S608

from __future__ import annotations

from grafana_foundation_sdk.builders.dashboard import Dashboard
from srv6pm.common.alert_rules import SESSION_DASHBOARD_UID
from srv6pm.dashboards import events
from srv6pm.dashboards import panels as p

UID = SESSION_DASHBOARD_UID  # the alert rules link to its panels
TITLE = "srv6pm / Session detail"

# Regex matches: Grafana interpolates InfluxQL variables in regex format (see fleet.py). All
# (.*) also matches a policy's only segment list, whose points have no segment_list tag.
_SESSION = '"session" =~ /^$session$/ AND "segment_list" =~ /^$segment_list$/'
_BY_DIRECTION = 'GROUP BY "segment_list", "direction"'
_PER_DIRECTION = "$tag_segment_list $tag_direction"
# Each bin's sum is a series named by its upper edge (ns) or +Inf: Grafana's "le" heatmap rows
_BINS = (p.rename("^sum_hist_lt_inf$", "+Inf"), p.rename("^sum_hist_lt_(-?[0-9]+)$", "$1"))
_TWO_WAY = "\"direction\" = 'two_way'"
_ONE_WAY = '"direction" =~ /^(forward|reverse)$/'
_PERCENTILES = (
    '"min_ns" AS "min", "p50_ns" AS "p50", "p90_ns" AS "p90", "p99_ns" AS "p99", '
    '"max_ns" AS "max", "mean_ns" AS "mean"'
)


def build() -> Dashboard:
    return (
        p.dashboard(
            UID,
            TITLE,
            "One STAMP session, one point per measurement block: loss in both directions, "
            "two-way and one-way delay percentiles, jitter, probes, and why blocks are invalid.",
        )
        .with_variable(
            p.variable("policy", "Policy", p.tag_values("loss", "policy"), include_all=True)
        )
        .with_variable(
            p.variable(
                "session",
                "Session",
                p.tag_values("loss", "session", '"policy" =~ /^$policy$/'),
            )
        )
        .with_variable(
            p.variable(
                "segment_list",
                "Segment list",
                # of the chosen policies (a variable without All, as session is, could not be
                # listed before one is chosen)
                p.tag_values("loss", "segment_list", '"policy" =~ /^$policy$/'),
                include_all=True,
            )
        )
        .annotation(
            p.annotation(
                "Liveness changes",
                'SELECT "description", "segment_list" FROM "liveness" '
                f"WHERE $timeFilter AND {_SESSION}",
                text="description",
                tags="segment_list",
                color="red",
            )
        )
        .annotation(events.threshold_annotation(_SESSION))
        .with_row(p.row("Loss"))
        .with_panel(
            p.timeseries(
                "Loss ratio per block",
                "Lost / transmitted packets of each valid block, per direction.",
                p.RATIO,
                [
                    p.target(
                        'SELECT "loss_ratio" FROM "loss" '
                        f'WHERE $timeFilter AND {_SESSION} AND "valid" = true '
                        f"{_BY_DIRECTION}",
                        alias=_PER_DIRECTION,
                    )
                ],
                width=8,
            )
        )
        .with_panel(
            p.timeseries(
                "Lost packets per block",
                "Packets lost in each valid block, per direction.",
                p.COUNT,
                [
                    p.target(
                        'SELECT "lost" FROM "loss" '
                        f'WHERE $timeFilter AND {_SESSION} AND "valid" = true '
                        f"{_BY_DIRECTION}",
                        alias=_PER_DIRECTION,
                    )
                ],
                bars=True,
                width=8,
            )
        )
        .with_panel(
            p.timeseries(
                "Transmitted / received per block",
                "Packets counted at the two ends of each direction (tx - rx = lost).",
                p.COUNT,
                [
                    p.target(
                        'SELECT "tx", "rx" FROM "loss" '
                        f'WHERE $timeFilter AND {_SESSION} AND "valid" = true '
                        f"{_BY_DIRECTION}",
                        alias=f"{_PER_DIRECTION} $col",
                    )
                ],
                width=8,
            )
        )
        .with_row(p.row("Delay"))
        .with_panel(
            p.timeseries(
                "Two-way delay percentiles",
                "Round-trip delay of each block's probes, reflector turnaround excluded.",
                p.NANOSECONDS,
                [
                    p.target(
                        f'SELECT {_PERCENTILES} FROM "delay" '
                        f'WHERE $timeFilter AND {_SESSION} AND {_TWO_WAY} AND "valid" = true '
                        'GROUP BY "segment_list"',
                        alias="$tag_segment_list $col",
                    )
                ],
            )
        )
        .with_panel(
            p.timeseries(
                "One-way delay percentiles",
                "Forward and reverse delay; empty for blocks whose clocks were not synchronised "
                "(the reason is in Invalid delay blocks).",
                p.NANOSECONDS,
                [
                    p.target(
                        f'SELECT {_PERCENTILES} FROM "delay" '
                        f'WHERE $timeFilter AND {_SESSION} AND {_ONE_WAY} AND "valid" = true '
                        f"{_BY_DIRECTION}",
                        alias=f"{_PER_DIRECTION} $col",
                    )
                ],
            )
        )
        .with_panel(
            p.timeseries(
                "Jitter per block",
                "Delay variation of each valid block, per direction.",
                p.NANOSECONDS,
                [
                    p.target(
                        'SELECT "jitter_ns" AS "jitter" FROM "delay" '
                        f'WHERE $timeFilter AND {_SESSION} AND "valid" = true '
                        f"{_BY_DIRECTION}",
                        alias=_PER_DIRECTION,
                    )
                ],
            )
        )
        .with_panel(
            p.timeseries(
                "Probes per block",
                "STAMP test packets sent, lost (no reflected reply) and usable delay samples.",
                p.COUNT,
                [
                    p.target(
                        'SELECT "probes_sent", "probes_lost", "samples" FROM "delay" '
                        f"WHERE $timeFilter AND {_SESSION} AND {_TWO_WAY} "
                        'GROUP BY "segment_list"',
                        alias="$tag_segment_list $col",
                    )
                ],
            )
        )
        .with_row(p.row("Invalid blocks"))
        .with_panel(
            p.table(
                "Invalid loss blocks",
                "Blocks of this session without a loss result, newest first.",
                [
                    p.target(
                        'SELECT "segment_list", "direction", "block", "reason" FROM "loss" '
                        f'WHERE $timeFilter AND {_SESSION} AND "valid" = false '
                        "ORDER BY time DESC LIMIT 500",
                        table=True,
                    )
                ],
            )
        )
        .with_panel(
            p.table(
                "Invalid delay blocks",
                "Blocks of this session without a delay result, newest first.",
                [
                    p.target(
                        'SELECT "segment_list", "direction", "block", "reason" FROM "delay" '
                        f'WHERE $timeFilter AND {_SESSION} AND "valid" = false '
                        "ORDER BY time DESC LIMIT 500",
                        table=True,
                    )
                ],
            )
        )
        .with_row(p.row("Probes (needs per-probe export)"))
        .with_panel(
            p.timeseries(
                "Per-probe delay",
                "From the optional probe measurement (off by default in the collector): "
                "two-way delay of individual probes, and one-way delay of those sent with "
                "synchronised clocks, as mean and max per interval.",
                p.NANOSECONDS,
                [
                    p.target(
                        'SELECT mean("two_way_ns") AS "two_way mean", '
                        'max("two_way_ns") AS "two_way max" FROM "probe" '
                        f"WHERE $timeFilter AND {_SESSION} "
                        "GROUP BY time($__interval) fill(none)",
                        alias="$col",
                    ),
                    p.target(
                        'SELECT mean("forward_ns") AS "forward mean", '
                        'mean("reverse_ns") AS "reverse mean" FROM "probe" '
                        f'WHERE $timeFilter AND {_SESSION} AND "one_way_valid" = true '
                        "GROUP BY time($__interval) fill(none)",
                        "B",
                        alias="$col",
                    ),
                ],
                width=24,
            )
        )
        .with_row(p.row("Delay histogram and liveness"))
        .with_panel(
            p.heatmap(
                "Two-way delay histogram",
                "Replies per delay bin and interval, summed over the chosen segment lists: each "
                "row is a bin up to its upper edge (the last up to infinity). Empty unless the "
                "session has histogram bin edges.",
                p.NANOSECONDS,
                [
                    p.target(
                        'SELECT sum(/^hist_lt_/) FROM "delay" '
                        f'WHERE $timeFilter AND {_SESSION} AND {_TWO_WAY} AND "valid" = true '
                        "GROUP BY time($__interval) fill(none)",
                        alias="$col",
                    )
                ],
                transformations=_BINS,
                width=24,
            )
        )
        .with_panel(
            p.stat(
                "Liveness",
                "UP or DOWN per segment list: its last change in the time range (the changes "
                "are drawn on the time series panels). Empty while none changed in the range "
                "or the session has liveness off.",
                [
                    p.target(
                        'SELECT last("state") AS "state" FROM "liveness" '
                        f'WHERE $timeFilter AND {_SESSION} GROUP BY "segment_list"',
                        alias="$tag_segment_list",
                    )
                ],
                width=8,
            )
        )
        .with_panel(
            p.table(
                "Liveness changes",
                "Each change, newest first: the state it went to (1 up, 0 down), from which, "
                "and the replies received or missed in a row that decided it.",
                [
                    p.target(
                        'SELECT "segment_list", "state", "previous", "consecutive", '
                        '"description" FROM "liveness" '
                        f"WHERE $timeFilter AND {_SESSION} ORDER BY time DESC LIMIT 500",
                        table=True,
                    )
                ],
                states=("state", "previous"),
                width=16,
            )
        )
        .with_row(p.row("Computation intervals and threshold events"))
        .with_panel(events.interval_delay(_SESSION))
        .with_panel(events.threshold_table(_SESSION))
    )
