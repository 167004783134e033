"""``python -m srv6pm.dashboards [--check] [--out DIR]``: write or verify the dashboard JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from srv6pm.dashboards import generate, to_json

# src/srv6pm/dashboards/__main__.py -> the dashboards/ project folder (editable install).
_PROJECT = Path(__file__).resolve().parents[3]


def default_out() -> Path:
    return _PROJECT / "generated"


def expected_files() -> dict[str, str]:
    """File name -> content, for every dashboard."""
    return {f"{uid}.json": to_json(model) for uid, model in generate().items()}


def stale(out: Path) -> list[tuple[str, str]]:
    """(file name, problem) for every file in ``out`` that is not what the code generates."""
    expected = expected_files()
    problems = []
    for name, text in expected.items():
        path = out / name
        if not path.is_file():
            problems.append((name, "missing"))
        elif path.read_text(encoding="utf-8") != text:
            problems.append((name, "differs from what the code generates"))
    if out.is_dir():
        problems += [
            (path.name, "no dashboard in the code generates it")
            for path in sorted(out.glob("*.json"))
            if path.name not in expected
        ]
    return problems


def write(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in expected_files().items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m srv6pm.dashboards", description=__doc__)
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 naming every file that differs from the code's output",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help=f"output folder (default {default_out()})"
    )
    args = parser.parse_args(argv)
    out: Path = args.out or default_out()
    if args.check:
        problems = stale(out)
        for name, problem in problems:
            print(f"{out / name}: {problem}", file=sys.stderr)
        if problems:
            print("regenerate with: python -m srv6pm.dashboards", file=sys.stderr)
            return 1
        return 0
    for path in write(out):
        print(path)
    # Removing files is left to the user: --out may name a folder holding other dashboards.
    for name, problem in stale(out):
        print(f"{out / name}: {problem}; delete it if it is no longer wanted", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
