"""The validation plots people look at: out-of-sample equity against buy-and-hold, the spread of
fold Sharpe ratios, action histograms and regime-shaded prices. Each function returns a matplotlib
``Figure`` (the Kedro layer saves it); nothing is shown or written here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from trading_rl.evaluation.validation.regimes import REGIMES
from trading_rl.monitoring.actions import ACTION_BUCKETS

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

REGIME_COLOURS = {"bull": "#2ca02c", "bear": "#d62728", "sideways": "#7f7f7f", "high_volatility": "#ff7f0e"}
REFERENCE_LINES = ("buy_and_hold", "buy_and_hold_full")
# The two buy-and-hold lines differ in what they hold; a label must say which is which.
MARKET_LABEL = "buy_and_hold_full (market: fully invested, no cap, no costs)"
REFERENCE_LABELS = {"buy_and_hold": "buy_and_hold (capped like the agent)", "buy_and_hold_full": MARKET_LABEL}
NO_TRADE_COLOUR = "#fdd0a2"


def shade_regimes(ax, index: pd.DatetimeIndex, labels: pd.Series) -> list[Patch]:
    """Colour the background of each run of bars by its regime label (unlabelled bars stay white);
    returns the legend handles of the regimes."""
    values = labels.reindex(index).to_numpy(dtype=object)
    change = np.flatnonzero(values[1:] != values[:-1]) + 1
    starts = np.concatenate(([0], change)) if len(values) else change
    stops = np.concatenate((change, [len(values)]))
    for start, stop in zip(starts, stops):
        regime = values[start]
        if regime in REGIME_COLOURS:
            right = index[stop] if stop < len(index) else index[-1]
            ax.axvspan(index[start], right, color=REGIME_COLOURS[regime], alpha=0.18, lw=0, zorder=0)
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from matplotlib.patches import Patch

    return [Patch(color=REGIME_COLOURS[r], alpha=0.35, label=r) for r in REGIMES]


def idle_windows(stitched: pd.DataFrame) -> pd.DataFrame:
    """Test windows (``agent``, ``seed``, ``fold``, ``start``, ``end``) of the agents' stitched
    steps in which no order was filled (every ``trade_value`` is 0)."""
    agents = stitched[stitched["kind"] == "agent"]
    if agents.empty:
        return pd.DataFrame(columns=["agent", "seed", "fold", "start", "end"])
    windows = agents.groupby(["agent", "seed", "fold"], sort=False).agg(
        start=("timestamp", "min"),
        end=("timestamp", "max"),
        traded=("trade_value", lambda values: bool((values.fillna(0.0) != 0.0).any())),
    )
    return windows[~windows["traded"]].drop(columns="traded").reset_index()


def out_of_sample_equity(stitched: pd.DataFrame) -> Figure:
    """Stitched test-window equity per symbol: every agent seed (thick, coloured, on top) over the
    buy-and-hold references (black) and the 1.0 line (under everything). A test window in which an
    agent seed filled no order is shaded and labelled, so a flat line reads as "did not trade"."""
    symbols = list(dict.fromkeys(stitched["symbol"]))
    # imported here: registering the pipelines (every kedro command) must not pay for it
    import matplotlib
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(symbols), 1, figsize=(11, 3.5 * len(symbols)), squeeze=False)
    for ax, symbol in zip(axes[:, 0], symbols):
        data = stitched[stitched["symbol"] == symbol]
        agents = data[data["kind"] == "agent"]
        colours = dict(zip(dict.fromkeys(agents["agent"]), matplotlib.color_sequences["tab10"]))
        ax.axhline(1.0, color="lightgrey", lw=0.8, zorder=0)
        for name, style in zip(REFERENCE_LINES, ("-", "--")):
            curve = data[data["agent"] == name]
            if not curve.empty:
                ax.plot(
                    curve["timestamp"],
                    curve["equity"],
                    color="black",
                    ls=style,
                    lw=1.4,
                    zorder=1,
                    label=REFERENCE_LABELS[name],
                )
        for (agent, seed), curve in agents.groupby(["agent", "seed"], sort=False):
            ax.plot(
                curve["timestamp"],
                curve["equity"],
                color=colours[agent],
                lw=2.2,
                alpha=0.9,
                zorder=3,
                label=f"{agent} (each line a seed)" if seed == agents[agents["agent"] == agent]["seed"].min() else None,
            )
        idle = idle_windows(data)
        for row in idle.itertuples():
            ax.axvspan(
                row.start,
                row.end,
                color=NO_TRADE_COLOUR,
                alpha=0.35,
                lw=0,
                zorder=0.5,
                label="test window with no trade" if row.Index == idle.index[0] else None,
            )
            ax.annotate(
                f"no trades: {row.agent} seed {row.seed}, fold {row.fold}",
                (row.start, 1.0),
                textcoords="offset points",
                xytext=(2, -12 - 9 * (row.Index % 3)),
                fontsize=7,
                color="#a63603",
            )
        ax.set_title(f"{symbol}: stitched out-of-sample equity (growth of 1)")
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def fold_sharpe_distribution(folds: pd.DataFrame) -> Figure:
    """Sharpe of every walk-forward window per agent and baseline (box + points): the spread, not
    the best seed."""
    names = list(dict.fromkeys(folds["agent"]))
    data = [pd.to_numeric(folds.loc[folds["agent"] == name, "sharpe"], errors="coerce").dropna() for name in names]
    # imported here: registering the pipelines (every kedro command) must not pay for it
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 3, 4))
    ax.boxplot([values.to_numpy() for values in data], tick_labels=names, showfliers=False)
    rng = np.random.default_rng(0)
    for position, values in enumerate(data, start=1):
        ax.scatter(position + rng.uniform(-0.15, 0.15, len(values)), values, s=12, alpha=0.6)
    ax.axhline(0.0, color="grey", lw=0.6)
    ax.set_ylabel("annualised Sharpe per test window")
    ax.set_title("Walk-forward Sharpe per window (all folds, seeds and symbols)")
    ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    return fig


def action_histograms(folds: pd.DataFrame) -> Figure:
    """Mean share of steps per action bucket for every agent (and the trading baselines)."""
    columns = [f"action_share_{bucket}" for bucket in ACTION_BUCKETS]
    rows = folds.dropna(subset=columns)
    shares = rows.groupby("agent", sort=False)[columns].mean()
    # imported here: registering the pipelines (every kedro command) must not pay for it
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / max(len(shares), 1)
    x = np.arange(len(ACTION_BUCKETS))
    for i, (name, values) in enumerate(shares.iterrows()):
        ax.bar(x + i * width - 0.4 + width / 2, values.to_numpy(), width, label=name)
    ax.axhline(0.6, color="red", ls="--", lw=0.8, label="dominance gate (60%)")
    ax.set_xticks(x, ACTION_BUCKETS)
    ax.set_ylabel("share of test steps")
    ax.set_title("Action histogram on walk-forward test windows")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def regime_shaded_panels(panels: Mapping[str, tuple[pd.Series, pd.Series]], title: str) -> Figure:
    """One panel per symbol: ``(close, labels)``, the closes with each bar's background coloured by
    its (causal) regime label; bars without a label (``None``/NaN) stay white."""
    # imported here: registering the pipelines (every kedro command) must not pay for it
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 4 * len(panels)), squeeze=False)
    for ax, (symbol, (close, labels)) in zip(axes[:, 0], panels.items()):
        ax.plot(close.index, close.to_numpy(), color="black", lw=0.9)
        ax.legend(handles=shade_regimes(ax, close.index, labels), loc="upper left", fontsize=8)
        ax.set_title(f"{symbol}: {title}")
    fig.tight_layout()
    return fig
