"""A run's figures per (role, N, configuration): medians, spreads, ratios to plain (of medians
and paired by round), the counting check, the target; as a table and warnings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from bench.fwd.common import FRAME_BYTES, STATS_FIELDS, TARGET
from bench.fwd.groups import Group
from bench.fwd.measure import Cost, Sample
from bench.harness.report import quartile_span, yes_no
from bench.harness.stats import Quartiles, median, paired, quartiles


class Row(TypedDict):
    """One (role, N, configuration) of the summary."""

    role: str
    n: int
    config: str
    baseline: str
    frames: str
    frame_bytes: int
    monitored: bool
    rounds: int
    offered_pps: float
    forwarded_pps: float
    loss: float
    loss_max: float
    backlog_drops: int
    gen_schedule_resets: float
    node_manager_cpu: float
    apply_s: float
    settle_s: float
    busy: Quartiles
    capacity_pps: Quartiles
    capacity_ratio: float
    capacity_ratio_paired: Quartiles
    net_rx_ns_per_pkt: Quartiles
    net_rx_ratio: float
    net_rx_ratio_paired: Quartiles
    net_rx_added_ns_paired: Quartiles
    ebpf_ns_per_run: Quartiles | None
    stats: dict[str, int]
    counted_over_received: float | None
    counting_ok_rounds: int
    meets_target: bool | None
    meets_target_net_rx: bool | None


def summarise(
    groups: Sequence[Group], samples: Sequence[Sample], costs: Sequence[Cost]
) -> list[Row]:
    """Per (role, N, configuration): medians and spread; capacity and NET_RX ratios to the
    plain configuration with the same frames (of the medians, and the median of per-round
    ratios, which cancels drift between rounds); the counters' check; the target."""
    cost = {(c["role"], c["n"], c["config"]): c["ns_per_run"] for c in costs}
    rows: list[Row] = []
    for g in groups:
        by_cfg = {
            c.name: [s for s in samples if (s.role, s.n, s.config) == (g.role, g.n, c.name)]
            for c in g.configs
        }
        for cfg in g.configs:
            group = by_cfg[cfg.name]
            if not group:
                continue
            base = {s.round: s for s in by_cfg[cfg.baseline]}
            base_cap = median([s.capacity_pps for s in base.values()])
            base_ns = median([s.net_rx_ns_per_pkt for s in base.values()])
            cap = median([s.capacity_pps for s in group])
            ns = median([s.net_rx_ns_per_pkt for s in group])
            by_round = [(s.round, s) for s in group]
            paired_cap = quartiles(
                paired(base, by_round, lambda p, s: s.capacity_pps / p.capacity_pps)
            )
            paired_ns = quartiles(
                paired(base, by_round, lambda p, s: p.net_rx_ns_per_pkt / s.net_rx_ns_per_pkt)
            )
            stats = {k: sum(s.stats.get(k, 0) for s in group) for k in STATS_FIELDS}
            rows.append(
                {
                    "role": g.role,
                    "n": g.n,
                    "config": cfg.name,
                    "baseline": cfg.baseline,
                    "frames": cfg.frames,
                    "frame_bytes": FRAME_BYTES[cfg.frames],
                    "monitored": cfg.monitored,
                    "rounds": len(group),
                    "offered_pps": median([s.offered_pps for s in group]),
                    "forwarded_pps": median([s.forwarded_pps for s in group]),
                    "loss": median([s.loss for s in group]),
                    "loss_max": max(s.loss for s in group),
                    "backlog_drops": sum(s.backlog_drops for s in group),
                    "gen_schedule_resets": median([s.gen_schedule_resets for s in group]),
                    "node_manager_cpu": median([s.node_manager_cpu for s in group]),
                    "apply_s": median([s.apply_s for s in group]),
                    "settle_s": median([s.settle_s for s in group]),
                    "busy": quartiles([s.busy for s in group]),
                    "capacity_pps": quartiles([s.capacity_pps for s in group]),
                    "capacity_ratio": cap / base_cap,
                    "capacity_ratio_paired": paired_cap,
                    "net_rx_ns_per_pkt": quartiles([s.net_rx_ns_per_pkt for s in group]),
                    "net_rx_ratio": base_ns / ns,
                    "net_rx_ratio_paired": paired_ns,
                    "net_rx_added_ns_paired": quartiles(
                        paired(
                            base, by_round, lambda p, s: s.net_rx_ns_per_pkt - p.net_rx_ns_per_pkt
                        )
                    ),
                    "ebpf_ns_per_run": cost.get((g.role, g.n, cfg.name)),
                    "stats": stats,
                    "counted_over_received": (
                        stats["counted"] / sum(s.received for s in group) if cfg.flows else None
                    ),
                    "counting_ok_rounds": sum(s.counting_ok for s in group),
                    "meets_target": (
                        paired_cap["median"] >= TARGET if cfg.name != cfg.baseline else None
                    ),
                    "meets_target_net_rx": (
                        paired_ns["median"] >= TARGET if cfg.name != cfg.baseline else None
                    ),
                }
            )
    return rows


def counting_cell(r: Row) -> str:
    """Monitored flows: did the counters count every packet? Otherwise: did no program of the
    node manager see any (plain forwarding really is plain)?"""
    rounds, ok = r["rounds"], r["counting_ok_rounds"]
    ratio = r["counted_over_received"]
    if ok == rounds:
        return f"yes ({ok}/{rounds})" if ratio is not None else "-"
    odd = {k: v for k, v in r["stats"].items() if v and k != "counted"}
    ratio_text = f"counted/forwarded {ratio:.4f}, " if ratio is not None else ""
    return f"**NO** ({ok}/{rounds} rounds ok; {ratio_text}{odd})"


def table(rows: Sequence[Row]) -> str:
    """The figures as a Markdown table (pasted into docs/BENCHMARKS.md)."""
    lines = [
        "| role | N | config | frame B | offered kpps | forwarded kpps | loss | r1 core busy "
        "| capacity kpps | ratio to plain | paired ratio | NET_RX ns/pkt | NET_RX paired ratio "
        "| eBPF ns/run | every packet counted | >= 0.98 (capacity / NET_RX) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        loss = "0" if r["loss_max"] <= 0 else f"**{r['loss']:.3%} (max {r['loss_max']:.3%})**"
        ebpf = r["ebpf_ns_per_run"]
        ebpf_text = f"{ebpf['median']:.1f} ({ebpf['min']:.1f}-{ebpf['max']:.1f})" if ebpf else "-"
        plain = r["config"] == r["baseline"]
        ratio = "1.000" if plain else f"{r['capacity_ratio']:.3f}"
        paired_text = "-" if plain else quartile_span(r["capacity_ratio_paired"])
        paired_ns = "-" if plain else quartile_span(r["net_rx_ratio_paired"])
        target = (
            "-" if plain else f"{yes_no(r['meets_target'])} / {yes_no(r['meets_target_net_rx'])}"
        )
        lines.append(
            f"| {r['role']} | {r['n']} | {r['config']} | {r['frame_bytes']} "
            f"| {r['offered_pps'] / 1e3:.1f} | {r['forwarded_pps'] / 1e3:.1f} | {loss} "
            f"| {quartile_span(r['busy'])} | {quartile_span(r['capacity_pps'], 1e3, '.0f')} "
            f"| {ratio} | {paired_text} "
            f"| {quartile_span(r['net_rx_ns_per_pkt'], 1, '.0f')} | {paired_ns} | {ebpf_text} "
            f"| {counting_cell(r)} | {target} |"
        )
    return "\n".join(lines)


def warnings(rows: Sequence[Row], rate: int) -> list[str]:
    out = []
    for r in rows:
        where = f"{r['role']} N={r['n']} {r['config']}"
        if r["offered_pps"] < 0.97 * rate:
            out.append(
                f"{where}: the generator offered {r['offered_pps'] / 1e3:.0f} of "
                f"{rate / 1e3:.0f} kpps (median; {r['gen_schedule_resets']} schedule resets)"
            )
        if r["loss_max"] > 0:
            out.append(f"{where}: loss in some rounds (max {r['loss_max']:.3%}): lower --rate")
        if r["counting_ok_rounds"] != r["rounds"]:
            out.append(f"{where}: counters disagree with the packets forwarded: {r['stats']}")
    return out
