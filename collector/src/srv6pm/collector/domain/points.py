"""Measurement records (proto/srv6pm/v1/records.proto) to InfluxDB line protocol.

Idempotent by construction: a point's series (measurement + tags) and timestamp (the block's
start; a probe's send time) come from the record only, so a record delivered twice writes the same
point twice, and InfluxDB keeps one. Nothing that differs between deliveries (journal id, creation
time) is a tag or the timestamp.

The schema (docs/RESULTS.md): measurements `loss`, `delay`, `delay_interval`, `flow`, `probe`,
`liveness`, `threshold`. A
session's points carry its segment list as the `segment_list` tag; a policy's only segment list
("") has no such tag, so its series are the ones it had before policies had several.

Lines are formatted here rather than with influxdb-client's Point: the same output (a test
compares them) at a fraction of the cost, on the collector's hot path (docs/BENCHMARKS.md):
each measurement's fields in a fixed (sorted) order, each series formatted and checked once.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable

from google.protobuf.message import DecodeError
from srv6pm.proto.v1 import records_pb2 as pb

ROLES = {pb.ROLE_INGRESS: "ingress", pb.ROLE_TRANSIT: "transit", pb.ROLE_EGRESS: "egress"}
LIVENESS = {pb.LIVENESS_STATE_UP: 1, pb.LIVENESS_STATE_DOWN: 0}  # the `state` field's values
# ThresholdEvent.metric: a tag, so a closed set (a typo must not become a series of its own)
METRICS = frozenset({"two_way_mean", "two_way_p99", "forward_mean", "reverse_mean", "jitter"})
MAX_HISTOGRAM_EDGES = 32  # each edge is a field key of `delay`: a bound on their number
MAX_TIME_NS = (1 << 63) - 1  # InfluxDB's timestamps are signed 64-bit
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_LABEL = 256


class RecordError(ValueError):
    """A record that cannot become points; the message says why (it goes to the DLQ)."""


Field = int | float | bool | str


def _tag(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def _field(value: Field) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, float):
        return repr(value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def series_key(measurement: str, tags: dict[str, str]) -> str:
    """`measurement,tag=value,...`: tags sorted (InfluxDB's series key order), empty tags left
    out (InfluxDB refuses them)."""
    return measurement + "".join(f",{k}={_tag(v)}" for k, v in sorted(tags.items()) if v)


def fields_part(fields: dict[str, Field]) -> str:
    return ",".join(f"{k}={_field(v)}" for k, v in sorted(fields.items()))


def line(measurement: str, tags: dict[str, str], fields: dict[str, Field], time_ns: int) -> str:
    """One point in line protocol."""
    return f"{series_key(measurement, tags)} {fields_part(fields)} {time_ns}"


def _label(value: str, what: str) -> str:
    if not value:
        raise RecordError(f"{what} is empty")
    return _text(value, what)


def _text(value: str, what: str) -> str:
    if len(value) > MAX_LABEL or _CONTROL.search(value):
        raise RecordError(f"{what} {value[:64]!r}: control characters or over {MAX_LABEL} long")
    return value


@functools.lru_cache(maxsize=1 << 16)
def _series(measurement: str, tags: tuple[tuple[str, str, str], ...]) -> str:
    """`measurement,tag=value,...` (keys sorted) from (key, value, what) after checking every
    value: a session's few series are formatted and checked once, not once per record."""
    return series_key(measurement, {k: (_label(v, what) if what else v) for k, v, what in tags})


def _reason(value: str) -> str:
    return _field(_text(value, "reason")) if value else '""'


def _block_time(block: int, info: pb.Block) -> int:
    if not info.period_ns:
        raise RecordError(f"block {block}: no block period")
    if info.index != block or info.start_unix_ns != block * info.period_ns:
        raise RecordError(
            f"block {block}: block_info says index {info.index}, start {info.start_unix_ns}, "
            f"period {info.period_ns}"
        )
    return int(info.start_unix_ns)


def _session_series(
    measurement: str,
    record: pb.MeasurementRecord,
    labels: pb.SessionLabels,
    session: str,
    by: str = "direction",
) -> Callable[[str], str]:
    """The series of a session's points, by direction (or by the `by` tag)."""
    base = (
        ("session", session, "session"),
        ("policy", labels.policy or session, "policy"),
        ("src_node", record.node, "node"),
        ("dst_node", labels.reflector_node or labels.reflector_address, ""),
        # "" (the policy's only segment list) is left out: series_key drops empty tags
        ("segment_list", labels.segment_list, ""),
    )
    if base[3][1]:
        _text(base[3][1], "reflector node")
    if base[4][1]:
        _text(base[4][1], "segment list")
    return lambda value: _series(measurement, (*base, (by, value, "")))


def _loss(record: pb.MeasurementRecord) -> list[str]:
    r = record.loss
    time_ns = _block_time(r.block, r.block_info)
    series = _session_series("loss", record, r.labels, r.session)
    reason = _reason(r.reason)
    out = []
    for direction, d in (("forward", r.forward), ("reverse", r.reverse)):
        if not r.valid:
            out.append(
                f"{series(direction)} block={r.block}i,reason={reason},valid=false {time_ns}"
            )
            continue
        if not r.HasField(direction):
            raise RecordError(f"valid loss record of block {r.block} without {direction} counts")
        if not math.isfinite(d.loss_ratio) or d.lost != d.tx - d.rx:
            raise RecordError(f"loss record of block {r.block}: inconsistent {direction} counts")
        out.append(
            f"{series(direction)} block={r.block}i,loss_ratio={float(d.loss_ratio)!r},"
            f"lost={d.lost}i,reason={reason},rx={d.rx}i,tx={d.tx}i,valid=true {time_ns}"
        )
    return out


def histogram_field(edge_ns: int | None) -> str:
    """The `delay` field of the bin below `edge_ns` (None: the last bin, up to infinity)."""
    return f"hist_lt_{'inf' if edge_ns is None else edge_ns}"


@functools.lru_cache(maxsize=1 << 10)
def _bin_fields(edges: tuple[int, ...]) -> tuple[str, ...]:
    """Field names of a session's bins, in bin order; checked once per set of edges."""
    if not edges:
        return ()  # no edges, no histogram
    if len(edges) > MAX_HISTOGRAM_EDGES:
        raise RecordError(f"{len(edges)} histogram edges: at most {MAX_HISTOGRAM_EDGES}")
    if any(a >= b for a, b in itertools.pairwise(edges)):
        raise RecordError(f"histogram edges {list(edges)} are not strictly ascending")
    return (*map(histogram_field, edges), histogram_field(None))


def _histogram(block: int, direction: str, stats: pb.DelayStats, names: tuple[str, ...]) -> str:
    """`hist_lt_<edge>=<count>i,...,` in sorted field order, or "" when there is none."""
    counts = stats.histogram
    if not counts:
        return ""
    if not names or len(counts) != len(names):
        raise RecordError(
            f"delay record of block {block}: {direction} has {len(counts)} histogram bins "
            f"for {max(0, len(names) - 1)} edges"
        )
    if sum(counts) != stats.samples:
        raise RecordError(
            f"delay record of block {block}: {direction} histogram holds {sum(counts)} replies, "
            f"samples says {stats.samples}"
        )
    return "".join(f"{k}={v}i," for k, v in sorted(zip(names, counts, strict=True)))


def _interval_time(r: pb.DelayRecord, block_ns: int) -> int:
    """A computation interval's start, once it is known to lie inside its block."""
    start, length = r.interval_start_unix_ns, r.interval_ns
    if not (start and length):
        raise RecordError(
            f"delay record of block {r.block}: interval start {start} with length {length}"
        )
    if not block_ns <= start < start + length <= block_ns + r.block_info.period_ns:
        raise RecordError(
            f"delay record of block {r.block}: interval [{start}, +{length}) is not inside "
            f"the block [{block_ns}, +{r.block_info.period_ns})"
        )
    return int(start)


def _delay(record: pb.MeasurementRecord) -> list[str]:
    """A block's record: `delay` at the block's start. A computation interval's record:
    `delay_interval` at the interval's start, so it never overwrites (nor is summed with) the
    block's point, and every `delay` query keeps reading blocks only (docs/RESULTS.md)."""
    r = record.delay
    time_ns = _block_time(r.block, r.block_info)
    measurement, interval = "delay", ""
    if r.interval_start_unix_ns or r.interval_ns:
        measurement, time_ns = "delay_interval", _interval_time(r, time_ns)
        interval = f"interval_ns={r.interval_ns}i,"
    series = _session_series(measurement, record, r.labels, r.session)
    names = _bin_fields(tuple(r.histogram_edges_ns))
    probes = f"probes_lost={r.probes_lost}i,probes_sent={r.probes_sent}i"
    out = []
    for direction, reason in (
        ("two_way", "no reply"),
        ("forward", r.one_way_reason),
        ("reverse", r.one_way_reason),
    ):
        if r.HasField(direction):
            s = getattr(r, direction)
            bins = _histogram(r.block, direction, s, names)
            out.append(
                f"{series(direction)} block={r.block}i,{bins}{interval}jitter_ns={s.jitter_ns}i,"
                f"max_ns={s.max_ns}i,mean_ns={s.mean_ns}i,min_ns={s.min_ns}i,p50_ns={s.p50_ns}i,"
                f'p90_ns={s.p90_ns}i,p99_ns={s.p99_ns}i,{probes},reason="",'
                f"samples={s.samples}i,valid=true {time_ns}"
            )
        else:
            why = _reason(reason or "no reply")
            out.append(
                f"{series(direction)} block={r.block}i,{interval}{probes},reason={why},valid=false "
                f"{time_ns}"
            )
    return out


def _flow(record: pb.MeasurementRecord) -> list[str]:
    r = record.flow_block
    if r.role not in ROLES:
        raise RecordError(f"flow {r.flow!r}: unknown role {r.role}")
    series = _series(
        "flow",
        (("node", record.node, "node"), ("flow", r.flow, "flow"), ("role", ROLES[r.role], "")),
    )
    time_ns = _block_time(r.block, r.block_info)
    common = f"block={r.block}i"
    if not r.valid:
        return [
            f"{series} {common},flow_mon_id={r.flow_mon_id}i,reason={_reason(r.reason)},"
            f"valid=false {time_ns}"
        ]
    return [
        f"{series} {common},bytes={r.bytes}i,flow_mon_id={r.flow_mon_id}i,packets={r.packets}i,"
        f"reason={_reason(r.reason)},valid=true {time_ns}"
    ]


def _probe(record: pb.MeasurementRecord) -> list[str]:
    r = record.probe
    if not r.sent_unix_ns:
        raise RecordError(f"probe {r.seq} of {r.session!r}: no send time")
    fields: dict[str, Field] = {
        "seq": r.seq,
        "two_way_ns": r.two_way_ns,
        "one_way_valid": r.one_way_valid,
    }
    if r.one_way_valid:
        fields.update(forward_ns=r.forward_ns, reverse_ns=r.reverse_ns)
    series = _session_series("probe", record, r.labels, r.session)("")
    return [f"{series} {fields_part(fields)} {r.sent_unix_ns}"]


def _liveness(record: pb.MeasurementRecord) -> list[str]:
    """One point per change, at the deciding probe's send time: a re-sent event overwrites it."""
    r = record.liveness
    if r.state not in LIVENESS:
        raise RecordError(f"liveness of {r.session!r}: state {r.state} is neither up nor down")
    if r.previous == r.state or (r.previous and r.previous not in LIVENESS):
        raise RecordError(f"liveness of {r.session!r}: previous state {r.previous}, no change")
    if not 0 < r.at_unix_ns <= MAX_TIME_NS:
        raise RecordError(f"liveness of {r.session!r}: time {r.at_unix_ns} out of range")
    up = r.state == pb.LIVENESS_STATE_UP
    fields: dict[str, Field] = {
        "state": LIVENESS[r.state],
        "consecutive": r.consecutive,
        # an annotation's text in Grafana
        "description": f"{'up' if up else 'down'}: {r.consecutive} replies "
        f"{'received' if up else 'missed'} in a row",
    }
    if r.previous:  # the session's first state has none
        fields["previous"] = LIVENESS[r.previous]
    series = _session_series("liveness", record, r.labels, r.session)("")
    return [f"{series} {fields_part(fields)} {r.at_unix_ns}"]


def _threshold(record: pb.MeasurementRecord) -> list[str]:
    """One point per crossing, at its `at_unix_ns`: a re-sent event overwrites it."""
    r = record.threshold
    what = f"threshold event of {r.session!r}"
    if r.metric not in METRICS:
        raise RecordError(f"{what}: unknown metric {r.metric[:64]!r}")
    if not 0 < r.at_unix_ns <= MAX_TIME_NS:
        raise RecordError(f"{what}: time {r.at_unix_ns} out of range")
    if r.first and r.reference_ns:
        raise RecordError(f"{what}: a first report with reference {r.reference_ns}")
    if not r.first and r.value_ns == r.reference_ns:
        raise RecordError(f"{what}: {r.metric} {r.value_ns} ns equals its reference, no crossing")
    change = "first value" if r.first else f"from {r.reference_ns / 1e3:g} µs"
    fields: dict[str, Field] = {
        "value_ns": r.value_ns,
        "reference_ns": r.reference_ns,
        "first": r.first,
        "accelerated": r.accelerated,
        # an annotation's text in Grafana
        "description": f"{r.metric} {r.value_ns / 1e3:g} µs ({change}"
        f"{', one burst' if r.accelerated else ''})",
    }
    series = _session_series("threshold", record, r.labels, r.session, by="metric")
    return [f"{series(r.metric)} {fields_part(fields)} {r.at_unix_ns}"]


_KINDS = {
    "loss": _loss,
    "delay": _delay,
    "flow_block": _flow,
    "probe": _probe,
    "liveness": _liveness,
    "threshold": _threshold,
}


def decode(value: bytes | None) -> pb.MeasurementRecord:
    if not value:
        raise RecordError("empty record")
    try:
        record: pb.MeasurementRecord = pb.MeasurementRecord.FromString(value)
    except DecodeError as e:
        raise RecordError(f"not a srv6pm.v1.MeasurementRecord: {e}") from None
    return record


def lines(record: pb.MeasurementRecord) -> list[str]:
    """The points of one record, or RecordError."""
    kind = record.WhichOneof("record")
    if kind is None:
        raise RecordError("record of no known type (a newer producer?)")
    return _KINDS[kind](record)
