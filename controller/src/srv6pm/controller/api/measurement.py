"""The measurement settings of request bodies (profiles and sessions share them) as domain
values."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel

from ..domain.model import DelayThresholds, LivenessSettings, Measurement

SETTINGS = tuple(f.name for f in dataclasses.fields(Measurement))


def value(name: str, given: Any) -> Any:
    """A setting's body value as the domain holds it (None stays None: not set)."""
    if given is None:
        return None
    if name == "liveness":
        return LivenessSettings(**given.model_dump())
    if name == "thresholds":
        return DelayThresholds(**{**given.model_dump(), "metrics": tuple(given.metrics)})
    if name == "histogram_edges_us":
        return tuple(given)
    return given


def given(body: BaseModel) -> dict[str, Any]:
    """The settings a body sets (not null), as domain values."""
    out = {name: value(name, getattr(body, name)) for name in SETTINGS}
    return {name: v for name, v in out.items() if v is not None}
