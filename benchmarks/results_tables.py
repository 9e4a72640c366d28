"""Print the markdown tables of docs/results.md from the latest reports in the catalog.

    python benchmarks/results_tables.py [--env base]

Reads (latest versions): sac_icm_evaluation_report, walk_forward_summary, regime_metrics,
validation_report. Run it after ``kedro run``; paste the output into docs/results.md.
"""

from __future__ import annotations

import argparse
import os

import pandas as pd

METRICS = ("sharpe", "total_return", "max_drawdown", "action_entropy", "hold_share", "n_trades")


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def evaluation_table(report: dict) -> str:
    rows = {"SAC+ICM (deterministic)": report["metrics"], **report["baselines"]}
    lines = ["| policy | " + " | ".join(METRICS) + " |", "|---|" + "---:|" * len(METRICS)]
    for name, metrics in rows.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(metrics.get(key)) for key in METRICS) + " |")
    return "\n".join(lines)


def walk_forward_table(summary: dict) -> str:
    lines = [
        "| symbol | agent | windows | trading share | median Sharpe [IQR] | median return | median max DD | "
        "positive-Sharpe share | PSR | DSR |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for symbol, block in summary.items():
        for agent, entry in block["agents"].items():
            sharpe = entry["metrics"]["sharpe"]
            lines.append(
                f"| {symbol} | {agent} | {entry['n_windows']} | {_fmt(entry.get('trading_share'))} | "
                f"{_fmt(sharpe['median'])} [{_fmt(sharpe['q25'])}, "
                f"{_fmt(sharpe['q75'])}] | {_fmt(entry['metrics']['total_return']['median'])} | "
                f"{_fmt(entry['metrics']['max_drawdown']['median'])} | "
                f"{_fmt(entry['positive_sharpe_share'])} | {_fmt(entry.get('psr_median'))} | "
                f"{_fmt(entry.get('dsr_median'))} |"
            )
    return "\n".join(lines)


def regime_table(regimes: pd.DataFrame) -> str:
    """Medians over seeds (``regime_metrics`` has one row per symbol × model × seed × regime)."""
    lines = ["| symbol | model | regime | share of steps | total return | Sharpe |", "|---|---|---|---:|---:|---:|"]
    medians = regimes.groupby(["symbol", "model", "regime"], sort=False)[["share_of_steps", "total_return", "sharpe"]]
    for row in medians.median().reset_index().itertuples(index=False):
        lines.append(
            f"| {row.symbol} | {row.model} | {row.regime} | {_fmt(row.share_of_steps)} | "
            f"{_fmt(row.total_return)} | {_fmt(row.sharpe)} |"
        )
    return "\n".join(lines)


def gate_table(report: dict) -> str:
    lines = ["| gate | value | threshold | status |", "|---|---:|---|---|"]
    for name, gate in report["gates"].items():
        lines.append(
            f"| {name} | {_fmt(gate.get('value'))} | {gate['comparison']} {gate['threshold']} | {gate['status']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="base")
    args = parser.parse_args()
    os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(os.getcwd())
    with KedroSession.create(env=args.env) as session:
        catalog = session.load_context().catalog
        print("## SAC+ICM on the validation split\n")
        print(evaluation_table(catalog.load("sac_icm_evaluation_report")))
        print("\n## Walk-forward\n")
        print(walk_forward_table(catalog.load("walk_forward_summary")))
        print("\n## Regimes (walk-forward test windows, medians over seeds)\n")
        print(regime_table(catalog.load("regime_metrics")))
        print("\n## Gates\n")
        print(gate_table(catalog.load("validation_report")))


if __name__ == "__main__":
    main()
