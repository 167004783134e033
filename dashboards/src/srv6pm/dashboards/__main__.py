"""``python -m srv6pm.dashboards [--check] [--out DIR] [thresholds]``: write or verify the
dashboard JSON and the alert rules (alert-rules.yaml)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from srv6pm.common.alert_rules import to_yaml
from srv6pm.common.objectives import Objective
from srv6pm.dashboards import generate, to_json
from srv6pm.dashboards.alerts import DEFAULT_OBJECTIVE, default_alert_rules

# src/srv6pm/dashboards/__main__.py -> the dashboards/ project folder (editable install).
_PROJECT = Path(__file__).resolve().parents[3]


def default_out() -> Path:
    return _PROJECT / "generated"


ALERT_RULES = "alert-rules.yaml"


def expected_files(objective: Objective | None = None) -> dict[str, str]:
    """File name -> content, for every dashboard and the alert rules."""
    files = {f"{uid}.json": to_json(model) for uid, model in generate().items()}
    files[ALERT_RULES] = to_yaml(default_alert_rules(objective or DEFAULT_OBJECTIVE))
    return files


def stale(out: Path, objective: Objective | None = None) -> list[tuple[str, str]]:
    """(file name, problem) for every file in ``out`` that is not what the code generates."""
    expected = expected_files(objective)
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


def write(out: Path, objective: Objective | None = None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in expected_files(objective).items():
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
    defaults = DEFAULT_OBJECTIVE
    maxima = parser.add_argument_group(
        "alert thresholds", "the objective every session is held to in alert-rules.yaml"
    )
    maxima.add_argument(
        "--loss-ratio-max",
        type=float,
        default=defaults.loss_ratio_max,
        help="a block's loss ratio, either direction (default %(default)s)",
    )
    maxima.add_argument(
        "--delay-p99-max-ms",
        type=float,
        default=defaults.delay_p99_max_ms,
        help="a block's two-way delay p99 in ms (default %(default)s)",
    )
    maxima.add_argument(
        "--invalid-blocks-max",
        type=int,
        default=defaults.invalid_blocks_max,
        help="blocks of the window not measured (default %(default)s)",
    )
    maxima.add_argument(
        "--window-blocks",
        type=int,
        default=defaults.window_blocks,
        help="blocks the rules look back over (default %(default)s)",
    )
    args = parser.parse_args(argv)
    objective = Objective(
        args.loss_ratio_max, args.delay_p99_max_ms, args.invalid_blocks_max, args.window_blocks
    )
    out: Path = args.out or default_out()
    if args.check:
        problems = stale(out, objective)
        for name, problem in problems:
            print(f"{out / name}: {problem}", file=sys.stderr)
        if problems:
            print("regenerate with: python -m srv6pm.dashboards", file=sys.stderr)
            return 1
        return 0
    for path in write(out, objective):
        print(path)
    # Removing files is left to the user: --out may name a folder holding other dashboards.
    for name, problem in stale(out, objective):
        print(f"{out / name}: {problem}; delete it if it is no longer wanted", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
