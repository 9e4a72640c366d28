"""The longest silences of a run's log: the gaps between consecutive timestamped lines.

A run logs with ``conf/logging.yml``'s format (``2026-11-27 13:00:40,731 INFO name: message``);
lines without a timestamp (tracebacks, progress bars, MLflow's own format) are skipped. Exit status 1
when a gap exceeds ``--max-gap`` seconds (the "no silent minute" check of docs/benchmarks.md).

    KEDRO_DISABLE_TELEMETRY=1 KEDRO_LOGGING_CONFIG=conf/logging.yml kedro run --env ci > run.log 2>&1
    python benchmarks/log_gaps.py run.log --max-gap 60
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) ")


@dataclass(frozen=True)
class Gap:
    seconds: float
    before: str  # the last line before the silence
    after: str  # the first line after it


def log_gaps(lines: list[str]) -> list[Gap]:
    """Every gap between consecutive timestamped lines, longest first."""
    stamped = [
        (datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f"), line.rstrip())
        for line in lines
        if (match := STAMP.match(line))
    ]
    gaps = [Gap((t2 - t1).total_seconds(), l1, l2) for (t1, l1), (t2, l2) in zip(stamped, stamped[1:])]
    return sorted(gaps, key=lambda gap: -gap.seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path)
    parser.add_argument("--max-gap", type=float, default=60.0, help="seconds")
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    gaps = log_gaps(args.log.read_text(errors="replace").splitlines())
    for gap in gaps[: args.top]:
        print(f"{gap.seconds:7.1f} s after: {gap.before[:150]}\n{'':9} before: {gap.after[:150]}")
    longest = gaps[0].seconds if gaps else 0.0
    verdict = "OK" if longest <= args.max_gap else "TOO LONG"
    print(f"longest gap {longest:.1f} s (limit {args.max_gap:.0f} s): {verdict}")
    sys.exit(0 if longest <= args.max_gap else 1)


if __name__ == "__main__":
    main()
