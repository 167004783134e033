"""Fleet overview: loss and delay of every SRv6 policy (the sum over its segment lists), each
segment list's loss, the lossiest policies, invalid blocks, the segment lists' liveness, and the
delay threshold events (an annotation and a table)."""

# S608: the queries are constant templates; Grafana, not this code, fills in the values.
# ruff: noqa: S608

from __future__ import annotations

from grafana_foundation_sdk.builders.dashboard import Dashboard
from srv6pm.dashboards import events
from srv6pm.dashboards import panels as p

UID = "srv6pm-fleet"
TITLE = "srv6pm / Fleet overview"
TOP_N = 10

# A regex match rather than = '$policy': Grafana interpolates InfluxQL variables in regex format,
# so a value in a string comparison would arrive backslash-escaped and match nothing.
_POLICY = '"policy" =~ /^$policy$/ AND "segment_list" =~ /^$segment_list$/'
_PER_BUCKET = 'GROUP BY time($__interval), "policy", "direction" fill(none)'
_SESSION_LINK = "/d/srv6pm-session?var-session=${__value.raw}&${__url_time_range}"


def build() -> Dashboard:
    return (
        p.dashboard(
            UID,
            TITLE,
            "Per-policy loss and delay measured by STAMP sessions (RFC 8762/8972), one value per "
            "measurement block, aggregated over the sessions of each policy.",
        )
        .with_variable(
            p.variable("policy", "Policy", p.tag_values("loss", "policy"), include_all=True)
        )
        .with_variable(
            p.variable(
                "segment_list",
                "Segment list",
                p.tag_values("loss", "segment_list", '"policy" =~ /^$policy$/'),
                include_all=True,
            )
        )
        .annotation(
            p.annotation(
                "Liveness changes",
                'SELECT "description", "session", "segment_list" FROM "liveness" '
                f"WHERE $timeFilter AND {_POLICY}",
                text="description",
                tags="segment_list",
                color="red",
            )
        )
        .annotation(events.threshold_annotation(_POLICY))
        .with_row(p.row("Loss"))
        .with_panel(
            p.timeseries(
                "Loss ratio per policy and direction",
                "Lost / transmitted packets of the policy's valid blocks (sum over its sessions, "
                "so sessions weigh by traffic, not equally).",
                p.RATIO,
                [
                    p.target(
                        'SELECT sum("lost") / sum("tx") AS "loss_ratio" FROM "loss" '
                        f'WHERE $timeFilter AND {_POLICY} AND "valid" = true {_PER_BUCKET}',
                        alias="$tag_policy $tag_direction",
                    )
                ],
            )
        )
        .with_panel(
            p.timeseries(
                "Lost packets per policy and direction",
                "Packets lost in the policy's valid blocks, summed over its sessions.",
                p.COUNT,
                [
                    p.target(
                        'SELECT sum("lost") AS "lost" FROM "loss" '
                        f'WHERE $timeFilter AND {_POLICY} AND "valid" = true {_PER_BUCKET}',
                        alias="$tag_policy $tag_direction",
                    )
                ],
                bars=True,
            )
        )
        .with_panel(
            p.table(
                f"Top {TOP_N} lossy policies",
                "Loss over the whole time range per policy and direction, highest ratio first. "
                "InfluxQL cannot order by a value, so the ranking is a table transformation.",
                [
                    p.target(
                        'SELECT sum("lost") AS "lost", sum("tx") AS "tx", '
                        'sum("lost") / sum("tx") AS "loss_ratio" FROM "loss" '
                        f'WHERE $timeFilter AND {_POLICY} AND "valid" = true '
                        'GROUP BY "policy", "direction"',
                        table=True,
                    )
                ],
                transformations=[p.hide_time(), p.sort_by("loss_ratio"), p.limit(TOP_N)],
                units={"loss_ratio": p.RATIO},
            )
        )
        .with_panel(
            p.table(
                "Invalid loss blocks",
                "Blocks whose loss could not be computed, newest first, with the reason.",
                [
                    p.target(
                        'SELECT "session", "policy", "direction", "block", "reason" FROM "loss" '
                        f'WHERE $timeFilter AND {_POLICY} AND "valid" = false '
                        "ORDER BY time DESC LIMIT 500",
                        table=True,
                    )
                ],
                links={"session": _SESSION_LINK},
            )
        )
        .with_row(p.row("Delay"))
        .with_panel(
            p.timeseries(
                "Delay p50 per policy and direction",
                "Mean of the sessions' per-block medians. One-way directions appear only for "
                "blocks with synchronised clocks (see Invalid delay blocks).",
                p.NANOSECONDS,
                [
                    p.target(
                        'SELECT mean("p50_ns") AS "p50" FROM "delay" '
                        f'WHERE $timeFilter AND {_POLICY} AND "valid" = true {_PER_BUCKET}',
                        alias="$tag_policy $tag_direction",
                    )
                ],
                width=8,
            )
        )
        .with_panel(
            p.timeseries(
                "Delay p99 per policy and direction",
                "Worst per-block p99 among the policy's sessions (a max, so one bad session "
                "shows).",
                p.NANOSECONDS,
                [
                    p.target(
                        'SELECT max("p99_ns") AS "p99" FROM "delay" '
                        f'WHERE $timeFilter AND {_POLICY} AND "valid" = true {_PER_BUCKET}',
                        alias="$tag_policy $tag_direction",
                    )
                ],
                width=8,
            )
        )
        .with_panel(
            p.timeseries(
                "Jitter per policy and direction",
                "Mean of the sessions' per-block jitter.",
                p.NANOSECONDS,
                [
                    p.target(
                        'SELECT mean("jitter_ns") AS "jitter" FROM "delay" '
                        f'WHERE $timeFilter AND {_POLICY} AND "valid" = true {_PER_BUCKET}',
                        alias="$tag_policy $tag_direction",
                    )
                ],
                width=8,
            )
        )
        .with_panel(
            p.timeseries(
                "STAMP probes lost per policy",
                "Test packets sent without a reflected reply, summed over the policy's sessions.",
                p.COUNT,
                [
                    p.target(
                        'SELECT sum("probes_lost") AS "probes_lost" FROM "delay" '
                        f"WHERE $timeFilter AND {_POLICY} AND \"direction\" = 'two_way' "
                        'GROUP BY time($__interval), "policy" fill(none)',
                        alias="$tag_policy",
                    )
                ],
                bars=True,
            )
        )
        .with_panel(
            p.table(
                "Invalid delay blocks",
                "Blocks without a delay result, newest first. One-way directions are invalid "
                "whenever the sender's and reflector's clocks are not synchronised.",
                [
                    p.target(
                        'SELECT "session", "policy", "direction", "block", "reason" FROM "delay" '
                        f'WHERE $timeFilter AND {_POLICY} AND "valid" = false '
                        "ORDER BY time DESC LIMIT 500",
                        table=True,
                    )
                ],
                links={"session": _SESSION_LINK},
            )
        )
        .with_row(p.row("Segment lists"))
        .with_panel(
            p.timeseries(
                "Loss ratio per segment list and direction",
                "Each segment list of the chosen policies on its own (a policy's only one has "
                "no name): which of a policy's paths loses its packets.",
                p.RATIO,
                [
                    p.target(
                        'SELECT sum("lost") / sum("tx") AS "loss_ratio" FROM "loss" '
                        f'WHERE $timeFilter AND {_POLICY} AND "valid" = true '
                        'GROUP BY time($__interval), "policy", "segment_list", "direction" '
                        "fill(none)",
                        alias="$tag_policy $tag_segment_list $tag_direction",
                    )
                ],
                width=16,
            )
        )
        .with_panel(
            p.table(
                "Liveness per segment list",
                "The last change in the time range of each probed segment list: its state "
                "(1 up, 0 down) and when it changed.",
                [
                    p.target(
                        'SELECT last("state") AS "state" FROM "liveness" '
                        f"WHERE $timeFilter AND {_POLICY} "
                        'GROUP BY "policy", "session", "segment_list"',
                        table=True,
                    )
                ],
                links={"session": _SESSION_LINK},
                states=("state",),
                width=8,
            )
        )
        .with_panel(events.threshold_table(_POLICY, links={"session": _SESSION_LINK}, width=24))
    )
