"""The measurement options profiles and sessions share beyond probe interval, liveness and
histogram: bursts, computation intervals, delay thresholds with hysteresis, and loss or delay
only; as API fields, and as text."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..common import UsageProblem

METRICS = ("two_way_mean", "two_way_p99", "forward_mean", "reverse_mean", "jitter")
# what a session may give back to its profile (`sessions update --clear`): the API's fields
SETTINGS = (
    "delay_interval_ms",
    "liveness",
    "histogram_edges_us",
    "burst_size",
    "computation_interval_ms",
    "thresholds",
    "loss",
)


def _opt(help_text: str, metavar: str | None = None, *names: str) -> Any:
    return typer.Option(*names, help=help_text, metavar=metavar, show_default=False)


BurstSize = Annotated[
    int | None, _opt("Probes sent back to back at each probe tick (1..100).", "N")
]
ComputationInterval = Annotated[
    int | None,
    _opt(
        "Delay also per interval of MS: a multiple of the delay interval dividing the block "
        "(0: per block only).",
        "MS",
    ),
]
Loss = Annotated[
    bool | None,
    _opt(
        "Measure loss per block (--delay-only: delay only, no Direct Measurement).",
        None,
        "--loss/--delay-only",
    ),
]
ThresholdPercent = Annotated[
    float | None, _opt("Delay threshold: report a move of more than P % (0: none).", "P")
]
ThresholdUs = Annotated[
    int | None, _opt("Delay threshold: report a move of more than US microseconds.", "US")
]
ThresholdEachBurst = Annotated[
    bool | None,
    _opt(
        "Also check each burst's mean (an accelerated report).",
        None,
        "--threshold-each-burst/--no-threshold-each-burst",
    ),
]
ThresholdMinReport = Annotated[
    int | None, _opt("Delay threshold: at most one report per metric per MS.", "MS")
]
ThresholdMetric = Annotated[
    list[str] | None,
    _opt(f"A delay the thresholds watch (repeat): {', '.join(METRICS)}.", "METRIC"),
]


def measuring(
    burst_size: int | None,
    computation_interval_ms: int | None,
    loss: bool | None,
    percent: float | None,
    absolute_us: int | None,
    each_burst: bool | None,
    min_report_ms: int | None,
    metrics: list[str] | None,
) -> dict[str, Any]:
    """The options given, as the API's fields; thresholds as a whole object (those not given
    take their defaults), as liveness does."""
    out: dict[str, Any] = {}
    if burst_size is not None:
        out["burst_size"] = burst_size
    if computation_interval_ms is not None:
        out["computation_interval_ms"] = computation_interval_ms
    if loss is not None:
        out["loss"] = loss
    given = {
        "percent": percent,
        "absolute_us": absolute_us,
        "check_each_burst": each_burst,
        "min_report_interval_ms": min_report_ms,
        "metrics": metrics or None,
    }
    thresholds = {k: v for k, v in given.items() if v is not None}
    if thresholds:
        out["thresholds"] = thresholds
    return out


def cleared(names: list[str] | None) -> dict[str, None]:
    """`--clear` settings as nulls: the session takes its profile's again."""
    unknown = sorted(set(names or ()) - set(SETTINGS))
    if unknown:
        raise UsageProblem(f"--clear {', '.join(unknown)}: expected one of {', '.join(SETTINGS)}")
    return dict.fromkeys(names or ())


def thresholds_text(t: dict[str, Any]) -> str | None:
    """None when there are none (both thresholds 0)."""
    by = [
        f"{t['percent']:g} %" if t["percent"] else "",
        f"{t['absolute_us']} us" if t["absolute_us"] else "",
    ]
    moved = " or ".join(b for b in by if b)
    if not moved:
        return None
    metrics = ", ".join(t["metrics"]) or METRICS[0]
    text = f"{metrics}: a move of more than {moved}"
    if t["check_each_burst"]:
        text += ", each burst too"
    if t["min_report_interval_ms"]:
        text += f", at most one per {t['min_report_interval_ms']} ms"
    return text


def rows(s: dict[str, Any]) -> list[tuple[str, Any]]:
    """A profile's or a session's (in effect) settings, as `show` lines."""
    interval = s["computation_interval_ms"]
    return [
        ("burst size", s["burst_size"] if s["burst_size"] > 1 else None),
        ("computation interval", f"{interval} ms" if interval else None),
        ("thresholds", thresholds_text(s["thresholds"])),
        ("measures", "loss and delay" if s["loss"] else "delay only"),
    ]
