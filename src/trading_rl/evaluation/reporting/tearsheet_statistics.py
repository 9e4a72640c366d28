"""What quantstats/pyfolio users expect on a tearsheet, computed from the rollouts: exposure (CAGR
and Calmar are ``metrics.annualized_return`` / ``calmar_ratio``), a monthly/yearly returns table,
the worst drawdowns, the return distribution and the per-trade list (backtesting.py's ``_trades``).

Each HTML block is one entry of ``STATISTICS_BLOCKS`` (title, function of a ``TearsheetSection``),
so another block (e.g. return attribution) is one more entry, not an edit of these.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.evaluation.metrics.metrics import drawdown_series
from trading_rl.evaluation.reporting.tearsheet_section import TearsheetSection

WORST_DRAWDOWNS = 5
TRADES_SHOWN = 50


def exposure(rollout: pd.DataFrame) -> float:
    """Share of bars holding a position (nan for a series without positions, e.g. the market line)."""
    if "position" not in rollout or not len(rollout):
        return math.nan
    return float(np.mean(rollout["position"].to_numpy(dtype=np.float64) != 0.0))


def period_returns(rollout: pd.DataFrame) -> pd.DataFrame:
    """Compounded returns per calendar month: rows are years, columns ``Jan .. Dec`` and ``year``."""
    series = pd.Series(rollout["return"].to_numpy(dtype=np.float64), index=pd.to_datetime(rollout["timestamp"]))
    monthly = (1.0 + series).groupby([series.index.year, series.index.month]).prod() - 1.0
    table = monthly.unstack().reindex(columns=range(1, 13))
    table.columns = [pd.Timestamp(2000, month, 1).strftime("%b") for month in table.columns]
    table["year"] = (1.0 + series).groupby(series.index.year).prod() - 1.0
    table.index.name = None
    return table


@dataclass(frozen=True)
class Drawdown:
    peak: pd.Timestamp
    trough: pd.Timestamp
    recovery: pd.Timestamp | None  # None: not recovered by the end of the rollout
    depth: float  # negative fraction
    bars: int  # peak to recovery (or to the end)


def worst_drawdowns(rollout: pd.DataFrame, count: int = WORST_DRAWDOWNS) -> list[Drawdown]:
    """The ``count`` deepest drawdown episodes (peak → trough → recovery), deepest first."""
    stamps = pd.DatetimeIndex(pd.to_datetime(rollout["timestamp"]))
    drawdown = drawdown_series(rollout["return"].to_numpy(dtype=np.float64))
    episodes, start = [], None
    for i, value in enumerate(np.append(drawdown, 0.0)):
        if value < 0 and start is None:
            start = i
        elif value >= 0 and start is not None:
            trough = start + int(np.argmin(drawdown[start:i]))
            recovered = i < len(drawdown)
            peak = max(start - 1, 0)
            episodes.append(
                Drawdown(
                    stamps[peak], stamps[trough], stamps[i] if recovered else None, float(drawdown[trough]), i - peak
                )
            )
            start = None
    return sorted(episodes, key=lambda e: e.depth)[:count]


def trade_list(rollout: pd.DataFrame) -> pd.DataFrame:
    """One row per fill: time, side, units, fill price, value and fees (empty without fills)."""
    columns = ["timestamp", "side", "units", "fill_price", "value", "fees"]
    if "trade_value" not in rollout:
        return pd.DataFrame(columns=columns)
    fills = rollout[rollout["trade_value"].to_numpy(dtype=np.float64) != 0.0]
    return pd.DataFrame(
        {
            "timestamp": pd.to_datetime(fills["timestamp"]).dt.strftime("%Y-%m-%d"),
            "side": np.where(fills["trade_value"] > 0, "buy", "sell"),
            "units": fills["trade_units"].abs() if "trade_units" in fills else np.nan,
            "fill_price": fills["fill_price"] if "fill_price" in fills else np.nan,
            "value": fills["trade_value"].abs(),
            "fees": fills["fees"] if "fees" in fills else np.nan,
        }
    ).reset_index(drop=True)


def return_histogram(section: TearsheetSection, bins: int = 40) -> pd.DataFrame:
    """Per-period return counts of the primary agent and capped buy-and-hold on shared bins."""
    name, rollout = section.primary
    series = {name: rollout["return"].to_numpy(dtype=np.float64)}
    if "buy_and_hold" in section.baselines:
        series["buy_and_hold"] = section.baselines["buy_and_hold"]["return"].to_numpy(dtype=np.float64)
    values = np.concatenate(list(series.values()))
    edges = np.histogram_bin_edges(values[np.isfinite(values)], bins=bins)
    return pd.DataFrame({key: np.histogram(v, bins=edges)[0] for key, v in series.items()}, index=edges[:-1])


# ------------------------------------------------------------------------------------ HTML


def _percent(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.1%}"


def monthly_returns_html(section: TearsheetSection) -> str:
    name, rollout = section.primary
    table = period_returns(rollout).map(_percent)
    return f"<p class='notes'>{html.escape(name)}, compounded per calendar month and year</p>" + table.to_html(
        classes="metrics", border=0
    )


def drawdowns_html(section: TearsheetSection) -> str:
    name, rollout = section.primary
    rows = [
        {
            "peak": e.peak.date(),
            "trough": e.trough.date(),
            "recovered": e.recovery.date() if e.recovery is not None else "not yet",
            "depth": _percent(e.depth),
            "bars": e.bars,
        }
        for e in worst_drawdowns(rollout)
    ]
    if not rows:
        return f"<p class='notes'>{html.escape(name)} never fell below a previous peak</p>"
    return f"<p class='notes'>{html.escape(name)}</p>" + pd.DataFrame(rows).to_html(
        classes="metrics", border=0, index=False
    )


def distribution_html(section: TearsheetSection) -> str:
    """Quantiles, skew and kurtosis of the per-period returns (the histogram is a panel)."""
    series = {name: r["return"].astype(float) for name, r in section.agents.items()}
    if "buy_and_hold" in section.baselines:
        series["buy_and_hold"] = section.baselines["buy_and_hold"]["return"].astype(float)
    rows = {
        name: {
            "worst": _percent(s.min()),
            "5%": _percent(s.quantile(0.05)),
            "median": _percent(s.median()),
            "95%": _percent(s.quantile(0.95)),
            "best": _percent(s.max()),
            "skew": f"{s.skew():.2f}",
            "kurtosis": f"{s.kurt() + 3.0:.2f}",
            "positive bars": _percent(float((s > 0).mean())),
        }
        for name, s in series.items()
    }
    return pd.DataFrame.from_dict(rows, orient="index").to_html(classes="metrics", border=0)


def trades_html(section: TearsheetSection) -> str:
    name, rollout = section.primary
    trades = trade_list(rollout)
    if trades.empty:
        return f"<p class='warning'>{html.escape(name)} never filled an order</p>"
    shown = trades.head(TRADES_SHOWN).assign(
        units=lambda t: t["units"].map(lambda v: f"{v:.4g}"),
        fill_price=lambda t: t["fill_price"].map(lambda v: f"{v:.2f}"),
        value=lambda t: t["value"].map(lambda v: f"{v:,.0f}"),
        fees=lambda t: t["fees"].map(lambda v: f"{v:.2f}"),
    )
    more = f", the first {TRADES_SHOWN} shown (all in the rollout parquet)" if len(trades) > TRADES_SHOWN else ""
    return f"<p class='notes'>{html.escape(name)}: {len(trades)} fills{more}</p>" + shown.to_html(
        classes="metrics", border=0, index=False
    )


# block key -> (heading, HTML of a section); drawn after the panels, in this order
STATISTICS_BLOCKS: dict[str, tuple[str, Callable[[TearsheetSection], str]]] = {
    "monthly_returns": ("Monthly and yearly returns", monthly_returns_html),
    "drawdowns": (f"Worst {WORST_DRAWDOWNS} drawdowns", drawdowns_html),
    "distribution": ("Return distribution (per bar)", distribution_html),
    "trades": ("Trades", trades_html),
}
