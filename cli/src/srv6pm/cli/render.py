"""What a command prints: Rich tables for people, the API's JSON unchanged for scripts.

Data never goes through Rich markup (a reason or a name with brackets would be read as styles):
every cell is a `Text`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

import typer
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

WIDTH_NOT_A_TERMINAL = 160  # tables piped to a file or less: wider than Rich's 80 columns
STATE_STYLE = {"applied": "green", "ok": "green", "pending": "yellow", "unknown": "yellow"}


class Format(StrEnum):
    TABLE = "table"
    JSON = "json"


class Output:
    """Where and how a command's results go (stdout), and its warnings (stderr)."""

    def __init__(self, fmt: Format) -> None:
        self.json = fmt is Format.JSON
        wide = sys.stdout.isatty() or os.environ.get("COLUMNS")
        self.console = Console(width=None if wide else WIDTH_NOT_A_TERMINAL, highlight=False)
        self.err = Console(stderr=True, highlight=False)

    def show(self, body: Any, render: Callable[[Any], Iterable[RenderableType]]) -> None:
        """The API's JSON as it came (json), or what `render` makes of it (table)."""
        if self.json:
            typer.echo(json.dumps(body, indent=2))
            return
        for part in render(body):
            self.console.print(part)

    def done(self, message: str) -> None:
        """A confirmation for people (nothing in json mode: the exit status says it)."""
        if not self.json:
            self.console.print(Text(message))

    def warn(self, message: str) -> None:
        self.err.print(Text(message, style="yellow"))


def cell(value: Any) -> Text:
    """One value as table text: `-` for none, lists joined, booleans as yes/no."""
    if value is None or value == "":
        return Text("-", style="dim")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    if isinstance(value, list | tuple):
        return Text(", ".join(str(v) for v in value)) if value else Text("-", style="dim")
    return Text(str(value))


def state(status: dict[str, Any]) -> Text:
    """An object's status: its state in colour, then the nodes' message when there is one."""
    name = str(status.get("state", "?"))
    out = Text(name, style=STATE_STYLE.get(name, "bold red"))
    if status.get("message"):
        out.append(f" {status['message']}")
    return out


def when(value: str | None) -> Text:
    """An API timestamp (ISO 8601) to the second, in UTC as the API gives it."""
    if not value:
        return cell(None)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return Text(value)
    return Text(parsed.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if parsed.tzinfo else ""))


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A table whose cells are values (`cell`) or ready-made Text."""
    out = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*(c if isinstance(c, Text) else cell(c) for c in row))
    return out


def fields(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    """One object, a field per line."""
    out = Table(title=title, title_justify="left", show_header=False, box=None, padding=(0, 2))
    out.add_column(style="bold")
    out.add_column(overflow="fold")
    for name, value in rows:
        out.add_row(name, value if isinstance(value, Text) else cell(value))
    return out


def page_note(body: dict[str, Any], noun: str) -> RenderableType:
    """Which part of a list this is, and how to get the next page when there is one."""
    items, total, offset = body["items"], body["total"], body["offset"]
    if not items:
        return Text(f"no {noun}" + (f" at offset {offset} (total {total})" if total else ""))
    last = offset + len(items)
    text = f"{offset + 1}-{last} of {total} {noun}"
    if last < total:
        return Text(f"{text}; more: --offset {last}", style="yellow")
    return Text(text, style="dim")
