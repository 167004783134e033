"""Service settings from, in increasing priority: defaults, a YAML file (--config), environment
variables SRV6PM_*, command-line flags (one per field, --field-name). One place for every
service, so the same rules hold everywhere and docs/CONFIGURATION.md is generated alike."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import ValidationError
from pydantic_settings import BaseSettings

S = TypeVar("S", bound=BaseSettings)


def json_object(value: object) -> object:
    """A dict setting given as a string (environment, flag) is a JSON object."""
    return json.loads(value) if isinstance(value, str) else value


def parse(model: type[S], argv: list[str] | None, prog: str, description: str | None) -> S:
    """The settings of a service from its command line (exits with the error on bad input)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", type=Path, help="YAML file with settings")
    for name, field in model.model_fields.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}", dest=name, default=None, help=field.description
        )
    args = vars(parser.parse_args(argv))
    config = args.pop("config")
    overrides = {k: v for k, v in args.items() if v is not None}
    try:
        data = (yaml.safe_load(config.read_text()) or {}) if config else {}
        return model(**{**data, **overrides})
    except ValidationError as e:
        parser.error(str(e))
        raise


def markdown(model: type[BaseSettings]) -> str:
    """The settings table of docs/CONFIGURATION.md, generated from the model.

    A field's ``json_schema_extra={"doc_default": TEXT}`` is shown as its default (what
    leaving it unset means); other ``None`` defaults read "(packaged)".
    """
    rows = ["| setting | env | flag | default | meaning |", "|---|---|---|---|---|"]
    for name, field in model.model_fields.items():
        default = field.get_default(call_default_factory=True)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if "doc_default" in extra:  # what an unset (None) default means, for the reader
            default = extra["doc_default"]
        elif default is None:
            default = "(packaged)"
        rows.append(
            f"| {name} | SRV6PM_{name.upper()} | --{name.replace('_', '-')} | "
            f"{default} | {field.description} |"
        )
    return "\n".join(rows) + "\n"
