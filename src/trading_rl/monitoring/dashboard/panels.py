"""What each dashboard panel shows, as plain tables and plotly figures (no Streamlit): equity against
buy-and-hold, drawdown, rolling Sharpe, position and action distribution, recent trades, drift per
feature, the active alerts and the champion's gates.

The record's statistics are recomputed here from its ``equity`` and ``return`` columns (a few lines
each) rather than imported from ``evaluation.metrics``, which sits above ``monitoring`` in the
layering; they agree with it on the same series (tests/monitoring/dashboard/test_panels.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from trading_rl.monitoring.actions import ACTION_BUCKETS, action_histogram
from trading_rl.monitoring.alerting import Level
from trading_rl.monitoring.dashboard.sources import Champion

TRADE_COLUMNS = ["timestamp", "trade_value", "position", "fees", "action_raw", "equity"]
DECISION_COLUMNS = [
    "timestamp",
    "symbol",
    "target_position",
    "kind",
    "units",
    "action_raw",
    "action_smoothed",
    "safeguard_verdict",
    "safeguard_rule",
    "confidence",
    "model_version",
]
ALERT_COLUMNS = ["timestamp", "level", "rule", "message", "value", "threshold"]
FIGURE_HEIGHT = 300


def _layout(figure: go.Figure, title: str, y_title: str) -> go.Figure:
    figure.update_layout(
        title=title,
        height=FIGURE_HEIGHT,
        margin={"l": 50, "r": 20, "t": 40, "b": 40},
        yaxis_title=y_title,
        legend={"orientation": "h", "y": -0.2},
    )
    return figure


# ------------------------------------------------------------------------------------- record series


def buy_and_hold_equity(record: pd.DataFrame, close: pd.Series) -> pd.Series:
    """The equity of holding the symbol over the record's bars, starting from the record's equity
    before its first bar (``equity / (1 + return)`` of that bar) at the last close before that bar
    (the first bar's own close when the price file starts there). NaN where the price file has no
    close at or before a bar."""
    if record.empty:
        return pd.Series(dtype="float64", name="buy_and_hold")
    stamps = pd.DatetimeIndex(record["timestamp"])
    close = close[~close.index.duplicated(keep="last")].sort_index()
    before = close.loc[close.index < stamps[0]]
    start_equity = float(record["equity"].iloc[0]) / (1.0 + float(record["return"].iloc[0]))
    if before.empty:
        start_close = close.asof(stamps[0])
        start_equity = float(record["equity"].iloc[0])
    else:
        start_close = float(before.iloc[-1])
    closes = close.reindex(close.index.union(stamps)).ffill().reindex(stamps)  # NaN before the first close
    return pd.Series(start_equity * closes.to_numpy() / start_close, index=record.index, name="buy_and_hold")


def drawdown_from_peak(returns: pd.Series) -> pd.Series:
    """Wealth after each bar over its running peak, minus 1 (0 at a new peak, -0.2 twenty percent
    below it); the peak includes the equity before the first bar, so a first loss counts (as
    ``evaluation.metrics.drawdown_series``)."""
    wealth = (1.0 + returns).cumprod()
    return wealth / wealth.cummax().clip(lower=1.0) - 1.0


def headline(record: pd.DataFrame, periods_per_year: float) -> dict[str, float]:
    """The record's bars, last equity, total return, worst drawdown and annualised Sharpe (NaN for
    fewer than 2 bars or constant returns, as ``evaluation.metrics.sharpe_ratio``)."""
    returns = record["return"]
    constant = len(returns) < 2 or returns.max() == returns.min()
    sharpe = math.nan if constant else float(returns.mean() / returns.std(ddof=1) * math.sqrt(periods_per_year))
    return {
        "bars": float(len(record)),
        "equity": float(record["equity"].iloc[-1]),
        "total_return": float((1.0 + returns).prod() - 1.0),
        "max_drawdown": float(drawdown_from_peak(returns).min()),
        "sharpe": sharpe,
    }


def rolling_sharpe_ratio(returns: pd.Series, window: int, periods_per_year: float) -> pd.Series:
    """Annualised Sharpe of the last ``window`` per-bar returns (zero risk-free rate, sample std);
    NaN before ``window`` bars and over a window without variation."""
    rolling = returns.rolling(window)
    std = rolling.std(ddof=1)
    return (rolling.mean() / std.where(std > 0)) * math.sqrt(periods_per_year)


def recent_trades(record: pd.DataFrame, rows: int) -> pd.DataFrame:
    """The newest ``rows`` bars on which the agent traded (``trade_value`` not 0), newest first."""
    traded = record.loc[record["trade_value"] != 0, [c for c in TRADE_COLUMNS if c in record.columns]]
    return traded.iloc[::-1].head(rows).reset_index(drop=True)


def action_bucket_shares(actions: Sequence[float] | np.ndarray, hold_threshold: float) -> dict[str, float]:
    """Share of actions per bucket of ``monitoring.actions`` (strong_sell .. strong_buy)."""
    return action_histogram(np.asarray(actions, dtype=np.float64), hold_threshold=hold_threshold)


# --------------------------------------------------------------------------------------- alerts


def active_alerts(alerts: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The newest alert of each rule (the state that rule is in), most severe first, then newest."""
    if not alerts:
        return pd.DataFrame(columns=ALERT_COLUMNS)
    frame = pd.DataFrame([{column: alert.get(column) for column in ALERT_COLUMNS} for alert in alerts])
    frame["_order"] = range(len(frame))
    frame["_severity"] = [int(Level.of(level)) for level in frame["level"]]
    newest = frame.sort_values("_order").groupby("rule", sort=False).tail(1)
    newest = newest.sort_values(["_severity", "_order"], ascending=[False, False])
    return newest[ALERT_COLUMNS].reset_index(drop=True)


def recent_alerts(alerts: Sequence[Mapping[str, Any]], rows: int) -> pd.DataFrame:
    """The newest ``rows`` alerts of the file, newest first."""
    frame = pd.DataFrame([{column: alert.get(column) for column in ALERT_COLUMNS} for alert in alerts[-rows:]])
    return frame.iloc[::-1].reset_index(drop=True) if len(frame) else pd.DataFrame(columns=ALERT_COLUMNS)


def _given(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def decision_summary(decision: Mapping[str, Any], count: int) -> str:
    """One line (Markdown) for the newest decision: when, what, the signal, the safeguards' word."""
    kind, units = _given(decision.get("kind")), _given(decision.get("units"))
    signal = " ".join(part for part in (kind, None if units is None else f"{units:g} units") if part)
    verdict, rule = _given(decision.get("safeguard_verdict")), _given(decision.get("safeguard_rule"))
    safeguard = " ".join(part for part in (verdict, f"({rule})" if rule else None) if part)
    confidence = _given(decision.get("confidence"))
    parts = [
        f"**Latest decision** {decision['timestamp']}",
        str(decision["symbol"]),
        f"target position {decision['target_position']:g}",
        signal or "no signal logged",
        f"safeguard {safeguard or 'not logged'}",
        *([f"confidence {confidence:.2f}"] if confidence is not None else []),
        f"model {_given(decision.get('model_version')) or '?'}",
        f"{count} decision(s) in the log",
    ]
    return " · ".join(parts)


def recent_decisions(decisions: pd.DataFrame, rows: int) -> pd.DataFrame:
    """The newest ``rows`` decisions of the log (by line), newest first, the schema's columns."""
    return decisions[DECISION_COLUMNS].iloc[::-1].head(rows).reset_index(drop=True)


# --------------------------------------------------------------------------------------- figures


def equity_figure(record: pd.DataFrame, buy_and_hold: pd.Series | None) -> go.Figure:
    """The agent's equity and, when the prices were found, buy-and-hold over the same bars."""
    figure = go.Figure(go.Scatter(x=record["timestamp"], y=record["equity"], name="agent", mode="lines"))
    if buy_and_hold is not None:
        figure.add_trace(go.Scatter(x=record["timestamp"], y=buy_and_hold, name="buy and hold", mode="lines"))
    return _layout(figure, "Equity against buy-and-hold", "equity")


def drawdown_figure(record: pd.DataFrame) -> go.Figure:
    drawdown = drawdown_from_peak(record["return"])
    figure = go.Figure(go.Scatter(x=record["timestamp"], y=drawdown, fill="tozeroy", name="drawdown", mode="lines"))
    figure.update_yaxes(tickformat=".1%")
    return _layout(figure, "Drawdown from the running peak", "drawdown")


def rolling_sharpe_figure(record: pd.DataFrame, window: int, periods_per_year: float) -> go.Figure:
    sharpe = rolling_sharpe_ratio(record["return"], window, periods_per_year)
    figure = go.Figure(go.Scatter(x=record["timestamp"], y=sharpe, name="Sharpe", mode="lines"))
    return _layout(figure, f"Rolling Sharpe ({window} bars, annualised)", "Sharpe")


def position_figure(record: pd.DataFrame) -> go.Figure:
    figure = go.Figure(go.Scatter(x=record["timestamp"], y=record["position"], name="position", line_shape="hv"))
    return _layout(figure, "Position", "units held")


def action_figure(actions: Sequence[float] | np.ndarray, hold_threshold: float, title: str) -> go.Figure:
    """Share of actions per bucket (strong_sell .. strong_buy, hold within ``hold_threshold``)."""
    shares = action_bucket_shares(actions, hold_threshold)
    figure = go.Figure(go.Bar(x=list(ACTION_BUCKETS), y=[shares[bucket] for bucket in ACTION_BUCKETS]))
    figure.update_yaxes(tickformat=".0%", range=[0, 1])
    return _layout(figure, title, "share of bars")


def drift_table(drift: Mapping[str, Any]) -> pd.DataFrame:
    """The forward drift report's per-feature rows, largest PSI first."""
    frame = pd.DataFrame(drift.get("features") or [])
    if frame.empty:
        return frame
    return frame.sort_values("psi", ascending=False, na_position="last").reset_index(drop=True)


def drift_figure(table: pd.DataFrame) -> go.Figure:
    """PSI per feature against the training split, drifted features (PSI and KS) in red."""
    colours = ["#d62728" if drifted else "#1f77b4" for drifted in table["drifted"]]
    figure = go.Figure(go.Bar(x=table["feature"], y=table["psi"], marker_color=colours))
    return _layout(figure, "Feature drift: PSI against the training split (red: drifted)", "PSI")


def champion_summary(champion: Champion) -> str:
    """One line (Markdown) for a deployed version: which, from which run and model file, promoted by
    whom and when."""
    run = f" from run `{champion.run_id}`" if champion.run_id else ""
    return (
        f"**{champion.registered_model}@{champion.alias} → version {champion.version}**{run}, model file version "
        f"{champion.save_version or '?'}, promoted by {champion.promoted_by or '?'} at {champion.promoted_at or '?'}"
    )


def gates_table(gates: Mapping[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"gate": list(gates), "verdict": list(gates.values())})
