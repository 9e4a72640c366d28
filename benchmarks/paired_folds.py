"""Two walk-forward fold tables of the same command, paired run by run: did a change to the engine
move the results beyond the seeds' noise?

    python benchmarks/paired_folds.py BEFORE_FOLDS_CSV AFTER_FOLDS_CSV [--metrics sharpe total_return]

An engine change that keeps each member's math and random streams but not its float rounding (a
batched kernel instead of a per-member one) gives other numbers after thousands of updates; what it
must keep is their distribution. The agents' rows are paired on (symbol, fold, agent, seed): per
symbol × fold the median of each table over the seeds and the median paired difference (after −
before) with its 90 % bootstrap interval (``evaluation.metrics.bootstrap.difference_ci``), then the
same over all folds per symbol and over everything, with the Wilcoxon signed-rank p of the pairs.
The folds of one seed are one chain (each fine-tunes the previous fold's agent), so those pairs are
not independent: the chain rows take each chain's mean over its folds as one pair, and set the
paired change beside the seeds' own spread (the standard deviation of the chains' means before).
Prints Markdown tables; exits 2 when the tables do not hold the same runs.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
from scipy.stats import wilcoxon

from trading_rl.evaluation.metrics.bootstrap import difference_ci

KEYS = ["symbol", "fold", "agent", "seed"]


def paired(before: pd.DataFrame, after: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """The agents' rows of both tables side by side (``<metric>_before`` / ``<metric>_after``)."""
    sides = [table[table["kind"] == "agent"].set_index(KEYS)[metrics] for table in (before, after)]
    if not sides[0].index.sort_values().equals(sides[1].index.sort_values()):
        raise ValueError("the two fold tables hold different (symbol, fold, agent, seed) runs")
    return sides[0].join(sides[1], lsuffix="_before", rsuffix="_after").reset_index()


def _row(label: str, group: pd.DataFrame, metric: str) -> str:
    before, after = group[f"{metric}_before"].to_numpy(), group[f"{metric}_after"].to_numpy()
    difference, low, high = difference_ci(after, before)
    changed = after - before
    p = wilcoxon(changed).pvalue if len(changed) >= 6 and np.any(changed != 0) else float("nan")
    return (
        f"| {label} | {len(group)} | {np.median(before):.3f} | {np.median(after):.3f} | "
        f"{difference:+.3f} [{low:+.3f}, {high:+.3f}] | {p:.2f} |"
    )


def report(pairs: pd.DataFrame, metric: str) -> list[str]:
    lines = [
        f"\n{metric}: median over seeds before / after, paired difference after − before [90 % CI], Wilcoxon p",
        "",
        "| symbol fold | runs | before | after | difference [90 % CI] | Wilcoxon p |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for (symbol, fold), group in pairs.groupby(["symbol", "fold"]):
        lines.append(_row(f"{symbol} {fold}", group, metric))
    for symbol, group in pairs.groupby("symbol"):
        lines.append(_row(f"**{symbol}, all folds**", group, metric))
    lines.append(_row("**all**", pairs, metric))
    chains = pairs.groupby(["symbol", "agent", "seed"])[[f"{metric}_before", f"{metric}_after"]].mean().reset_index()
    for symbol, group in chains.groupby("symbol"):
        lines.append(_row(f"**{symbol}, chain means**", group, metric))
    lines.append(_row("**all chain means**", chains, metric))
    spread = chains.groupby("symbol")[f"{metric}_before"].std()
    lines.append(
        "\nseeds' spread (sd of the chain means before): " + ", ".join(f"{s} {v:.3f}" for s, v in spread.items())
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--metrics", nargs="+", default=["sharpe", "total_return"])
    args = parser.parse_args()
    try:
        pairs = paired(pd.read_csv(args.before), pd.read_csv(args.after), args.metrics)
    except ValueError as error:
        print(f"{args.before} vs {args.after}: {error}", file=sys.stderr)
        sys.exit(2)
    for metric in args.metrics:
        print("\n".join(report(pairs, metric)))


if __name__ == "__main__":
    main()
