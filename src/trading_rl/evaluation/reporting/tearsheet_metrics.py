"""The tearsheet's two tables of one row per agent and baseline: the metrics (every number from the
rollouts with ``evaluation.metrics.metrics``; DSR from the trial ledger's trial count,
``evaluation.ledger.ledger.deflated_sharpe``) with their text form, and the attribution of each row against
the section's market line (``evaluation.metrics.attribution``) with its HTML block.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

from trading_rl.evaluation.ledger.ledger import Trials, deflated_sharpe
from trading_rl.evaluation.metrics.attribution import ATTRIBUTION_KEYS, return_attribution, rollout_exposure
from trading_rl.evaluation.metrics.baselines import MARKET
from trading_rl.evaluation.metrics.metrics import (
    annualized_return,
    calmar_ratio,
    compute_metrics,
    json_ready,
    return_metrics,
    return_moments,
)
from trading_rl.evaluation.reporting.plots import REFERENCE_LABELS
from trading_rl.evaluation.reporting.tearsheet_section import TearsheetSection, rollout_returns, rollout_timestamps
from trading_rl.evaluation.reporting.tearsheet_statistics import exposure

# metric key -> column heading of the tearsheet's table
TABLE_COLUMNS = {
    "sharpe": "Sharpe",
    "total_return": "return",
    "max_drawdown": "max DD",
    "sortino": "Sortino",
    "cagr": "CAGR",
    "calmar": "Calmar",
    "exposure": "exposure",
    "annualized_volatility": "ann. vol",
    "n_trades": "fills",
    "action_entropy": "entropy",
    "hold_share": "hold",
    "psr": "PSR",
    "dsr": "DSR",
}


def metrics_table(section: TearsheetSection, hold_threshold: float, trials: Trials | None = None) -> pd.DataFrame:
    """One row per agent and baseline, one column per ``TABLE_COLUMNS`` key; PSR against a zero Sharpe for every row,
    DSR (agents only) against the ``trials`` the ledger counts (undefined with fewer than 2)."""
    rows, periods_per_year = {}, section.periods_per_year

    def growth(rollout: pd.DataFrame) -> dict[str, float]:
        returns = rollout_returns(rollout)
        return {
            "cagr": annualized_return(returns, periods_per_year),
            "calmar": calmar_ratio(returns, periods_per_year),
            "exposure": exposure(rollout),
        }

    for name, rollout in section.agents.items():
        metrics = compute_metrics(rollout, periods_per_year, hold_threshold)
        dsr = math.nan if trials is None else deflated_sharpe(return_moments(rollout_returns(rollout)), trials)
        rows[name] = {**metrics, **growth(rollout), "dsr": dsr}
    for name, rollout in section.baselines.items():
        if name == MARKET:
            market = json_ready(return_metrics(rollout_returns(rollout), periods_per_year))
            rows[REFERENCE_LABELS[MARKET]] = {**market, **growth(rollout)}
        else:
            rows[name] = {**compute_metrics(rollout, periods_per_year, hold_threshold), **growth(rollout)}
    table = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(TABLE_COLUMNS))
    return table.apply(pd.to_numeric, errors="coerce")


def _format(column: str, value: float) -> str:
    if value is None or not np.isfinite(value):
        return "n/a"
    if column in ("total_return", "max_drawdown", "annualized_volatility", "hold_share", "cagr", "exposure"):
        return f"{value:.1%}"
    if column == "n_trades":
        return f"{int(value)}"
    return f"{value:.3f}"


def formatted_table(table: pd.DataFrame) -> pd.DataFrame:
    """``metrics_table`` as text: percentages, counts, ``n/a`` for undefined; headings from ``TABLE_COLUMNS``."""
    return pd.DataFrame({TABLE_COLUMNS[c]: [_format(c, v) for v in table[c]] for c in table.columns}, index=table.index)


# ------------------------------------------------------------------------------ attribution

ATTRIBUTION_TITLE = "Attribution against the market line"
# attribution key -> column heading of the attribution table (alpha and its CI share one column)
ATTRIBUTION_HEADINGS = {
    "alpha_annual": "alpha/yr [90% CI]",
    "alpha_t": "alpha t",
    "beta": "beta",
    "mean_exposure": "mean exposure",
    "timing_corr": "timing corr",
    "sharpe": "Sharpe ± SE",
    "exposure_matched_sharpe": "exposure-matched Sharpe",
}


def _exposure(rollout: pd.DataFrame) -> np.ndarray | None:
    """The rollout's exposure: its ``exposure`` column (walk-forward steps) or from equity and cash."""
    if "exposure" in rollout:
        return rollout["exposure"].to_numpy(dtype=np.float64)
    if {"equity", "cash"} <= set(rollout.columns):
        return rollout_exposure(rollout)
    return None


def attribution_table(section: TearsheetSection) -> pd.DataFrame:
    """``evaluation.metrics.attribution`` of every agent and baseline of ``section`` (not the market line it
    is measured against), one row each: the ``Attribution`` fields; ``reason`` says what is n/a."""
    if MARKET not in section.baselines:
        raise ValueError(f"tearsheet section {section.title!r} has no market line ({MARKET!r}) to attribute against")
    line = section.baselines[MARKET]
    market = pd.Series(rollout_returns(line), index=rollout_timestamps(line))
    rows = {}
    for name, rollout in {**section.agents, **section.baselines}.items():
        if name == MARKET:
            continue
        exposure = _exposure(rollout)
        aligned = market.reindex(rollout_timestamps(rollout)).to_numpy()
        if exposure is None or np.isnan(aligned).any():
            rows[name] = {"reason": "no exposure or no market return on some of its bars"}
            continue
        attribution = return_attribution(
            rollout_returns(rollout),
            exposure,
            aligned,
            periods_per_year=section.periods_per_year,
            cost_rate=0.0 if section.cost_rate is None else section.cost_rate,
        ).to_dict()
        if section.cost_rate is None:
            attribution["exposure_matched_sharpe"] = None
        rows[name] = attribution
    return pd.DataFrame.from_dict(rows, orient="index").reindex(columns=[*ATTRIBUTION_KEYS])


def _attribution_cell(column: str, row: pd.Series) -> str:
    def number(key: str, percent: bool = False) -> str:
        value = row[key]
        if value is None or not np.isfinite(value):
            return "n/a"
        return f"{value:+.1%}" if percent else f"{value:.2f}"

    if column == "alpha_annual":
        return f"{number('alpha_annual', True)} [{number('alpha_ci90_low', True)}, {number('alpha_ci90_high', True)}]"
    if column == "sharpe":
        return f"{number('sharpe')} ± {number('sharpe_se')}"
    if column == "mean_exposure":
        return "n/a" if row[column] is None or not np.isfinite(row[column]) else f"{row[column]:.1%}"
    return number(column)


def attribution_html(section: TearsheetSection) -> str:
    """The section's "Attribution" block: alpha [90% CI], its t, beta, mean exposure, timing
    correlation, the Sharpe with its standard error and the exposure-matched passive's Sharpe, then
    how they are measured."""
    table = attribution_table(section)
    shown = pd.DataFrame(
        {
            heading: [_attribution_cell(column, row) for _, row in table.iterrows()]
            for column, heading in ATTRIBUTION_HEADINGS.items()
        },
        index=table.index,
    )
    costs = "its costs unknown" if section.cost_rate is None else f"{section.cost_rate:.2%} per unit traded"
    note = (
        "Each row's per-bar returns regressed on the market line's (fully invested, no costs): alpha is the "
        "annualised intercept with a Newey-West 90% CI, beta the slope; timing corr is corr(exposure at a close, "
        "the market's next bar); the exposure-matched passive holds the market at the row's mean exposure, "
        f"rebalanced each bar, {costs}. SE: the Sharpe's standard error (Mertens); an edge below about twice "
        "it cannot be told from luck. An agent shows skill when its alpha's CI lies above 0 and its Sharpe "
        "beats the exposure-matched one."
    )
    return (
        f'<div class="panel" data-panel="attribution"><h3>{html.escape(ATTRIBUTION_TITLE)}</h3>'
        f"{shown.to_html(classes='metrics', border=0, escape=True)}"
        f'<p class="notes">{html.escape(note)}</p></div>'
    )
