"""A run's figures per (role, N, configuration): clocks per packet of the path and of the
plugin's node, the throughput ratio to plain (of the medians, and paired by round), the clocks
the plugin adds, the counting check, the target; as a table and warnings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from bench.fwd.common import FRAME_BYTES
from bench.harness.report import markdown_table, quartile_span, yes_no
from bench.harness.stats import Quartiles, median, paired, quartiles
from bench.vppfwd.measure import Config, Sample

TARGET = 0.97  # plain clocks per packet / with the plugin, at every N and role


class Row(TypedDict):
    role: str
    n: int
    config: str
    baseline: str
    frame_bytes: int
    rounds: int
    cpp: Quartiles  # clocks per packet, the forwarding path (every node but pg-input)
    plugin_cpp: Quartiles | None
    ratio: float  # plain cpp / cpp, of the medians: the throughput ratio
    ratio_paired: Quartiles | None
    added_cpp_paired: Quartiles | None  # cpp - plain cpp, round by round
    nodes_cpp: dict[str, float]  # medians per node
    counting_ok_rounds: int
    disturbed_rounds: int
    attempts: int
    meets_target: bool | None


def summarise(
    groups: Sequence[tuple[str, int, Sequence[Config]]], samples: Sequence[Sample]
) -> list[Row]:
    rows: list[Row] = []
    for role, n, cfgs in groups:
        by_cfg = {
            c.name: [s for s in samples if (s.role, s.n, s.config) == (role, n, c.name)]
            for c in cfgs
        }
        for cfg in cfgs:
            group = by_cfg[cfg.name]
            if not group:
                continue
            plain = cfg.name == cfg.baseline
            base = {s.round: s for s in by_cfg[cfg.baseline]}
            by_round = [(s.round, s) for s in group]
            ratios = paired(base, by_round, lambda p, s: p.cpp / s.cpp)
            added = paired(base, by_round, lambda p, s: s.cpp - p.cpp)
            node_names = dict.fromkeys(k for s in group for k in s.nodes_cpp)
            ratio_paired = None if plain or not ratios else quartiles(ratios)
            rows.append(
                {
                    "role": role,
                    "n": n,
                    "config": cfg.name,
                    "baseline": cfg.baseline,
                    "frame_bytes": FRAME_BYTES[cfg.frames],
                    "rounds": len(group),
                    "cpp": quartiles([s.cpp for s in group]),
                    "plugin_cpp": quartiles([s.plugin_cpp for s in group]) if cfg.hooked else None,
                    "ratio": median([s.cpp for s in base.values()])
                    / median([s.cpp for s in group]),
                    "ratio_paired": ratio_paired,
                    "added_cpp_paired": None if plain or not added else quartiles(added),
                    "nodes_cpp": {
                        k: median([s.nodes_cpp.get(k, 0.0) for s in group]) for k in node_names
                    },
                    "counting_ok_rounds": sum(s.counting_ok for s in group),
                    "disturbed_rounds": sum(s.disturbed for s in group),
                    "attempts": sum(s.attempts for s in group),
                    "meets_target": None
                    if ratio_paired is None
                    else ratio_paired["median"] >= TARGET,
                }
            )
    return rows


def table(rows: Sequence[Row]) -> str:
    """The figures as a Markdown table (pasted into docs/BENCHMARKS.md)."""
    header = [
        "role",
        "N",
        "config",
        "frame B",
        "clocks/pkt (path)",
        "plugin node clocks/pkt",
        "added clocks/pkt (paired)",
        "throughput ratio",
        "paired ratio",
        "every packet counted",
        f">= {TARGET}",
    ]
    body = []
    for r in rows:
        plain = r["config"] == r["baseline"]
        plugin = r["plugin_cpp"]
        added = r["added_cpp_paired"]
        ratio_paired = r["ratio_paired"]
        body.append(
            [
                r["role"],
                str(r["n"]),
                r["config"],
                str(r["frame_bytes"]),
                quartile_span(r["cpp"], 1, ".1f"),
                "-" if plugin is None else quartile_span(plugin, 1, ".1f"),
                "-" if added is None else quartile_span(added, 1, ".1f"),
                "1.000" if plain else f"{r['ratio']:.3f}",
                "-" if ratio_paired is None else quartile_span(ratio_paired),
                f"{'yes' if r['counting_ok_rounds'] == r['rounds'] else '**NO**'} "
                f"({r['counting_ok_rounds']}/{r['rounds']})",
                "-" if plain else yes_no(r["meets_target"]),
            ]
        )
    return markdown_table(header, body)


def warnings(rows: Sequence[Row]) -> list[str]:
    out = []
    for r in rows:
        where = f"{r['role']} N={r['n']} {r['config']}"
        if r["counting_ok_rounds"] != r["rounds"]:
            out.append(
                f"{where}: {r['rounds'] - r['counting_ok_rounds']} of {r['rounds']} samples "
                "not forwarded or not counted exactly (see the samples)"
            )
        if r["disturbed_rounds"]:
            out.append(
                f"{where}: {r['disturbed_rounds']} of {r['rounds']} samples were preempted or "
                "had time stolen even after retries"
            )
    return out
