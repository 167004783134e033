"""Measurement records (proto/srv6pm/v1/records.proto) to InfluxDB line protocol.

Idempotent by construction: a point's series (measurement + tags) and timestamp (the block's
start; a probe's send time) come from the record only, so a record delivered twice writes the same
point twice, and InfluxDB keeps one. Nothing that differs between deliveries (journal id, creation
time) is a tag or the timestamp.

The schema (docs/RESULTS.md): measurements `loss`, `delay`, `flow`, `probe`.

Lines are formatted here rather than with influxdb-client's Point: the same output (a test
compares them) at a fraction of the cost, on the collector's hot path (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import math
import re

from google.protobuf.message import DecodeError
from srv6pm.proto.v1 import records_pb2 as pb

ROLES = {pb.ROLE_INGRESS: "ingress", pb.ROLE_TRANSIT: "transit", pb.ROLE_EGRESS: "egress"}
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


def line(measurement: str, tags: dict[str, str], fields: dict[str, Field], time_ns: int) -> str:
    """One point in line protocol; tags sorted (InfluxDB's series key order), empty tags left
    out (InfluxDB refuses them)."""
    tag_part = "".join(f",{k}={_tag(v)}" for k, v in sorted(tags.items()) if v)
    field_part = ",".join(f"{k}={_field(v)}" for k, v in sorted(fields.items()))
    return f"{measurement}{tag_part} {field_part} {time_ns}"


def _label(value: str, what: str) -> str:
    if not value:
        raise RecordError(f"{what} is empty")
    return _text(value, what)


def _text(value: str, what: str) -> str:
    if len(value) > MAX_LABEL or _CONTROL.search(value):
        raise RecordError(f"{what} {value[:64]!r}: control characters or over {MAX_LABEL} long")
    return value


def _block_time(block: int, info: pb.Block) -> int:
    if not info.period_ns:
        raise RecordError(f"block {block}: no block period")
    if info.index != block or info.start_unix_ns != block * info.period_ns:
        raise RecordError(
            f"block {block}: block_info says index {info.index}, start {info.start_unix_ns}, "
            f"period {info.period_ns}"
        )
    return int(info.start_unix_ns)


def _session_tags(
    record: pb.MeasurementRecord, labels: pb.SessionLabels, session: str
) -> dict[str, str]:
    return {
        "session": _label(session, "session"),
        "policy": _text(labels.policy or session, "policy"),
        "src_node": _label(record.node, "node"),
        "dst_node": _text(labels.reflector_node or labels.reflector_address, "reflector node"),
    }


def _loss(record: pb.MeasurementRecord) -> list[str]:
    r = record.loss
    time_ns = _block_time(r.block, r.block_info)
    tags = _session_tags(record, r.labels, r.session)
    out = []
    for direction, has, d in (
        ("forward", r.HasField("forward"), r.forward),
        ("reverse", r.HasField("reverse"), r.reverse),
    ):
        fields: dict[str, Field] = {
            "block": r.block,
            "valid": r.valid,
            "reason": _text(r.reason, "reason"),
        }
        if r.valid:
            if not has:
                raise RecordError(
                    f"valid loss record of block {r.block} without {direction} counts"
                )
            if not math.isfinite(d.loss_ratio) or d.lost != d.tx - d.rx:
                raise RecordError(
                    f"loss record of block {r.block}: inconsistent {direction} counts"
                )
            fields.update(tx=d.tx, rx=d.rx, lost=d.lost, loss_ratio=float(d.loss_ratio))
        out.append(line("loss", {**tags, "direction": direction}, fields, time_ns))
    return out


def _stats_fields(s: pb.DelayStats) -> dict[str, Field]:
    return {
        "samples": s.samples,
        "min_ns": s.min_ns,
        "p50_ns": s.p50_ns,
        "p90_ns": s.p90_ns,
        "p99_ns": s.p99_ns,
        "max_ns": s.max_ns,
        "mean_ns": s.mean_ns,
        "jitter_ns": s.jitter_ns,
    }


def _delay(record: pb.MeasurementRecord) -> list[str]:
    r = record.delay
    time_ns = _block_time(r.block, r.block_info)
    tags = _session_tags(record, r.labels, r.session)
    common: dict[str, Field] = {
        "block": r.block,
        "probes_sent": r.probes_sent,
        "probes_lost": r.probes_lost,
    }
    out = []
    for direction, name, reason in (
        ("two_way", "two_way", "no reply"),
        ("forward", "forward", r.one_way_reason),
        ("reverse", "reverse", r.one_way_reason),
    ):
        fields = dict(common)
        if r.HasField(name):
            fields.update(valid=True, reason="", **_stats_fields(getattr(r, name)))
        else:
            fields.update(valid=False, reason=_text(reason or "no reply", "reason"))
        out.append(line("delay", {**tags, "direction": direction}, fields, time_ns))
    return out


def _flow(record: pb.MeasurementRecord) -> list[str]:
    r = record.flow_block
    if r.role not in ROLES:
        raise RecordError(f"flow {r.flow!r}: unknown role {r.role}")
    tags = {
        "node": _label(record.node, "node"),
        "flow": _label(r.flow, "flow"),
        "role": ROLES[r.role],
    }
    fields: dict[str, Field] = {
        "block": r.block,
        "valid": r.valid,
        "reason": _text(r.reason, "reason"),
        "flow_mon_id": r.flow_mon_id,
    }
    if r.valid:
        fields.update(packets=r.packets, bytes=r.bytes)
    return [line("flow", tags, fields, _block_time(r.block, r.block_info))]


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
    return [line("probe", _session_tags(record, r.labels, r.session), fields, r.sent_unix_ns)]


_KINDS = {"loss": _loss, "delay": _delay, "flow_block": _flow, "probe": _probe}


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
