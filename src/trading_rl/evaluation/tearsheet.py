"""The tearsheet of a trained agent: its rollout next to every baseline, as one PNG and one
self-contained HTML page.

Library choice (docs/tearsheets.md): matplotlib only. quantstats/pyfolio draw returns-only
tearsheets (no positions over price, no regimes, no action shares) and pull in yfinance, seaborn
and IPython; plotly's self-contained HTML carries ~4 MB of inline JavaScript per file. The panels
here are drawn once per axis with matplotlib (already a dependency), and the HTML embeds the
panels as base64 PNGs next to a real HTML metrics table, so it opens offline in any browser.

A tearsheet has one or more *sections* (a symbol, a checkpoint): each holds the agents' rollouts
(several lines when there are several agents or seeds; the first is the one whose trades and
actions are drawn), the baselines' rollouts, the market line (``buy_and_hold_full``), closes and
causal regime labels. Every number comes from the rollouts (``evaluation.metrics``), DSR from the
trial ledger's trial count (``evaluation.ledger.deflated_sharpe``).
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import gymnasium as gym
import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox
from matplotlib.typing import ColorType

from trading_rl.config import Section, setting
from trading_rl.envs.continuous import trading_env
from trading_rl.evaluation.attribution import ATTRIBUTION_KEYS, env_cost_rate, return_attribution, rollout_exposure
from trading_rl.evaluation.baselines import MARKET, market_returns, run_baselines
from trading_rl.evaluation.ledger import Trials, deflated_sharpe
from trading_rl.evaluation.metrics import (
    annualized_return,
    calmar_ratio,
    compute_metrics,
    drawdown_series,
    json_ready,
    return_metrics,
    return_moments,
)
from trading_rl.evaluation.plots import REFERENCE_LABELS, shade_regimes
from trading_rl.evaluation.regimes import RegimeParams, label_regimes
from trading_rl.evaluation.tearsheet_statistics import (
    STATISTICS_BLOCKS,
    Verdict,
    banner_html,
    exposure,
    header_html,
    return_histogram,
)
from trading_rl.monitoring.actions import ACTION_BUCKETS, bucketize

# Panel key -> title. The HTML gives every panel a section with this title (tests and the
# screenshot check look for them); the PNG draws them as axis titles.
PANELS: dict[str, str] = {
    "equity": "Equity against every baseline (growth of 1)",
    "drawdown": "Underwater drawdown",
    "rolling_sharpe": "Rolling Sharpe",
    "trades": "Position and trades over price, shaded by regime",
    "actions": "Action shares over time",
    "distribution": "Distribution of per-bar returns",
    "metrics": "Metrics with PSR and DSR",
}
# The rollout columns a tearsheet keeps (returns, positions, actions and fills), one row per step.
ROLLOUT_COLUMNS = (
    "timestamp",
    "return",
    "equity",
    "position",
    "action_raw",
    "action_type",
    "trade_value",
    "trade_units",
    "fill_price",
    "fees",
)
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
TITLE_TOP = 0.985  # figure fraction above which the section title sits
PANEL_RIGHT = 0.78  # figure fraction where the axes end: legends sit outside, to their right
LEGEND_FONT, TICK_FONT, TITLE_FONT = 9, 9, 12
LEGEND_WIDTH = 22  # characters per legend line
BUCKET_COLOURS = ("#b2182b", "#ef8a62", "#bdbdbd", "#67a9cf", "#2166ac")
BASELINE_STYLE = {
    "buy_and_hold": ("black", "-"),
    "cash": ("#999999", ":"),
    "random": ("#8c564b", "-."),
    "sma_crossover": ("#9467bd", "--"),
}

# Marks the page of a phase with nothing to show (e.g. forward without new bars): the run summary
# does not list it as a tearsheet.
EMPTY_PAGE_MARK = '<meta name="trading-rl-tearsheet" content="empty">'


def tearsheet_outputs(prefix: str) -> list[str]:
    """The datasets a phase's tearsheet is saved as: its rollouts, its PNGs and its HTML page."""
    return [f"{prefix}_rollout", f"{prefix}_tearsheet_plot", f"{prefix}_tearsheet"]


@dataclass
class TearsheetSection:
    """One tearsheet section: ``agents`` and ``baselines`` map a name to a rollout
    (``rollout.run_episode`` rows; only ``return`` is needed for the market line in ``baselines``),
    ``close`` the closes over at least the rollout's bars, ``regimes`` causal labels of those bars."""

    title: str
    symbol: str
    periods_per_year: float
    agents: Mapping[str, pd.DataFrame]
    baselines: Mapping[str, pd.DataFrame]
    close: pd.Series
    regimes: pd.Series | None = None
    notes: list[str] = field(default_factory=list)
    # commission + slippage per unit traded of the section's env: the exposure-matched passive's
    # costs in the attribution table (None: unknown, its Sharpe is n/a)
    cost_rate: float | None = None
    facts: dict[str, str] = field(default_factory=dict)  # header lines: costs, position cap, model version

    def __post_init__(self) -> None:
        if not self.agents:
            raise ValueError(f"tearsheet section {self.title!r} has no agent rollout")
        for name, rollout in {**self.agents, **self.baselines}.items():
            missing = [c for c in ("timestamp", "return") if c not in rollout]
            if missing:
                raise ValueError(f"tearsheet section {self.title!r}: rollout {name!r} lacks column(s) {missing}")
            if rollout.empty:
                raise ValueError(f"tearsheet section {self.title!r}: rollout {name!r} is empty")

    @property
    def primary(self) -> tuple[str, pd.DataFrame]:
        return next(iter(self.agents.items()))


def env_section(
    title: str,
    symbol: str,
    periods_per_year: float,
    agents: Mapping[str, pd.DataFrame],
    make_env: Callable[[], gym.Env],
    closes: pd.Series,
    seed: int,
    regime_params: RegimeParams,
) -> TearsheetSection:
    """A section for agents evaluated on ``make_env``'s episode: the baselines run through the same
    env, seed and costs, the market line on the same bars, regimes labelled causally on ``closes``
    (every close up to the episode's, so the labels are warm from its first bar)."""
    baselines = run_baselines(make_env, seed)
    env = make_env()
    market = pd.DataFrame(
        {"timestamp": baselines["buy_and_hold"]["timestamp"].to_numpy(), "return": market_returns(env, seed)}
    )
    return TearsheetSection(
        title,
        symbol,
        periods_per_year,
        agents,
        {**baselines, MARKET: market},
        closes,
        label_regimes(closes, regime_params),
        cost_rate=env_cost_rate(trading_env(env, "env_section").config),
    )


def _timestamps(rollout: pd.DataFrame) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(pd.to_datetime(rollout["timestamp"]))


def _returns(rollout: pd.DataFrame) -> np.ndarray:
    return rollout["return"].to_numpy(dtype=np.float64)


def rollout_table(sections: Sequence[TearsheetSection]) -> pd.DataFrame:
    """Every section's agent and baseline rollouts as one long frame (``section``, ``kind``,
    ``agent``, ``step`` + ``ROLLOUT_COLUMNS`` present, ``equity_index``: growth of 1)."""
    frames = []
    for section in sections:
        named = [("agent", n, r) for n, r in section.agents.items()]
        named += [("market" if n == MARKET else "baseline", n, r) for n, r in section.baselines.items()]
        for kind, name, rollout in named:
            columns = [c for c in ROLLOUT_COLUMNS if c in rollout]
            frame = rollout[columns].reset_index(drop=True).copy()
            frame["timestamp"] = pd.to_datetime(frame["timestamp"])
            frame.insert(0, "step", np.arange(len(frame)))
            frame.insert(0, "agent", name)
            frame.insert(0, "kind", kind)
            frame.insert(0, "section", section.title)
            frame["equity_index"] = np.cumprod(1.0 + _returns(rollout))
            if "action_type" in frame:
                frame["action_type"] = frame["action_type"].astype(str)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def metrics_table(section: TearsheetSection, hold_threshold: float, trials: Trials | None = None) -> pd.DataFrame:
    """One row per agent and baseline, one column per ``TABLE_COLUMNS`` key; PSR against a zero Sharpe for every row,
    DSR (agents only) against the ``trials`` the ledger counts (undefined with fewer than 2)."""
    rows, periods_per_year = {}, section.periods_per_year

    def growth(rollout: pd.DataFrame) -> dict[str, float]:
        returns = _returns(rollout)
        return {
            "cagr": annualized_return(returns, periods_per_year),
            "calmar": calmar_ratio(returns, periods_per_year),
            "exposure": exposure(rollout),
        }

    for name, rollout in section.agents.items():
        metrics = compute_metrics(rollout, periods_per_year, hold_threshold)
        dsr = math.nan if trials is None else deflated_sharpe(return_moments(_returns(rollout)), trials)
        rows[name] = {**metrics, **growth(rollout), "dsr": dsr}
    for name, rollout in section.baselines.items():
        if name == MARKET:
            market = json_ready(return_metrics(_returns(rollout), periods_per_year))
            rows[REFERENCE_LABELS[MARKET]] = {**market, **growth(rollout)}
        else:
            rows[name] = {**compute_metrics(rollout, periods_per_year, hold_threshold), **growth(rollout)}
    table = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(TABLE_COLUMNS))
    return table.apply(pd.to_numeric, errors="coerce")


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
    """``evaluation.attribution`` of every agent and baseline of ``section`` (not the market line it
    is measured against), one row each: the ``Attribution`` fields; ``reason`` says what is n/a."""
    if MARKET not in section.baselines:
        raise ValueError(f"tearsheet section {section.title!r} has no market line ({MARKET!r}) to attribute against")
    line = section.baselines[MARKET]
    market = pd.Series(_returns(line), index=_timestamps(line))
    rows = {}
    for name, rollout in {**section.agents, **section.baselines}.items():
        if name == MARKET:
            continue
        exposure = _exposure(rollout)
        aligned = market.reindex(_timestamps(rollout)).to_numpy()
        if exposure is None or np.isnan(aligned).any():
            rows[name] = {"reason": "no exposure or no market return on some of its bars"}
            continue
        attribution = return_attribution(
            _returns(rollout),
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


# ------------------------------------------------------------------------------------ panels


def _agent_colours(section: TearsheetSection) -> dict[str, ColorType]:
    return dict(zip(section.agents, matplotlib.color_sequences["tab10"]))


def draw_equity(ax: Axes, section: TearsheetSection) -> None:
    """Agents thick and coloured on top, baselines thin, the market dashed, 1.0 under everything."""
    ax.axhline(1.0, color="lightgrey", lw=0.8, zorder=0)
    for name, rollout in section.baselines.items():
        colour, style = ("black", "--") if name == MARKET else BASELINE_STYLE.get(name, ("grey", "-"))
        ax.plot(
            _timestamps(rollout),
            np.cumprod(1.0 + _returns(rollout)),
            color=colour,
            ls=style,
            lw=1.1,
            zorder=1,
            label=REFERENCE_LABELS.get(name, name),
        )
    for name, agent_colour in _agent_colours(section).items():
        rollout = section.agents[name]
        ax.plot(
            _timestamps(rollout), np.cumprod(1.0 + _returns(rollout)), color=agent_colour, lw=2.2, zorder=3, label=name
        )
    ax.set_yscale("log")  # the uncapped market line no longer squeezes the capped curves flat
    plain = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:.3g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_ylabel("growth of 1 (log scale)")
    _legend_outside(ax)


def draw_drawdown(ax: Axes, section: TearsheetSection) -> None:
    for name, colour in _agent_colours(section).items():
        rollout = section.agents[name]
        drawdown = drawdown_series(_returns(rollout))
        ax.fill_between(_timestamps(rollout), drawdown, 0.0, color=colour, alpha=0.25, lw=0, zorder=2)
        ax.plot(_timestamps(rollout), drawdown, color=colour, lw=1.6, zorder=3, label=name)
    if "buy_and_hold" in section.baselines:
        rollout = section.baselines["buy_and_hold"]
        ax.plot(
            _timestamps(rollout),
            drawdown_series(_returns(rollout)),
            color="black",
            lw=1.0,
            zorder=1,
            label=REFERENCE_LABELS["buy_and_hold"],
        )
    ax.axhline(0.0, color="lightgrey", lw=0.8, zorder=0)
    ax.set_ylabel("drawdown from peak")
    _legend_outside(ax)


def rolling_window(n_steps: int, window: int) -> int:
    """The rolling-Sharpe window: ``window`` bars, shortened to a third of a short rollout (>= 5)."""
    return max(5, min(int(window), n_steps // 3))


def rolling_sharpe(returns: np.ndarray, window: int, periods_per_year: float) -> np.ndarray:
    """Annualised Sharpe of the trailing ``window`` returns (NaN before the window fills and where
    the returns did not move)."""
    series = pd.Series(returns)
    rolling = series.rolling(window)
    std = rolling.std(ddof=1)
    return (rolling.mean() / std.where(std > 0) * math.sqrt(periods_per_year)).to_numpy()


def draw_rolling_sharpe(ax: Axes, section: TearsheetSection, window: int) -> None:
    n_steps = len(section.primary[1])
    window = rolling_window(n_steps, window)
    ax.axhline(0.0, color="lightgrey", lw=0.8, zorder=0)
    curves: dict[str, tuple[pd.DataFrame, ColorType, float, int]] = {
        name: (rollout, colour, 1.8, 3)
        for (name, rollout), colour in zip(section.agents.items(), _agent_colours(section).values())
    }
    if "buy_and_hold" in section.baselines:
        curves[REFERENCE_LABELS["buy_and_hold"]] = (section.baselines["buy_and_hold"], "black", 1.0, 1)
    for name, (rollout, colour, width, order) in curves.items():
        ax.plot(
            _timestamps(rollout),
            rolling_sharpe(_returns(rollout), window, section.periods_per_year),
            color=colour,
            lw=width,
            zorder=order,
            label=name,
        )
    ax.set_ylabel(f"Sharpe, {window}-bar window")
    _legend_outside(ax)


def draw_trades(ax: Axes, section: TearsheetSection) -> None:
    """Closes over the primary agent's bars, background by regime, buys ▲ and sells ▼ at their fill
    price, and the position (units) on the right axis. A rollout without a fill says so."""
    name, rollout = section.primary
    stamps = _timestamps(rollout)
    close = section.close.loc[stamps[0] : stamps[-1]]
    regime_handles = [] if section.regimes is None else shade_regimes(ax, close.index, section.regimes)
    ax.plot(close.index, close.to_numpy(), color="black", lw=0.9, zorder=2, label="close")
    traded = rollout["trade_value"].to_numpy(dtype=np.float64) if "trade_value" in rollout else np.zeros(len(rollout))
    prices = (
        rollout["fill_price"].to_numpy(dtype=np.float64) if "fill_price" in rollout else np.full(len(rollout), np.nan)
    )
    for mask, marker, colour, label in (
        (traded > 0, "^", "#1a9850", "buy fill"),
        (traded < 0, "v", "#d73027", "sell fill"),
    ):
        if mask.any():
            ax.scatter(stamps[mask], prices[mask], marker=marker, color=colour, s=22, zorder=4, label=label)
    if not (traded != 0).any():
        ax.text(
            0.5,
            0.5,
            f"no trades: {name} never filled an order in this window",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=11,
            color="#d73027",
            bbox={"facecolor": "white", "edgecolor": "#d73027", "alpha": 0.9},
        )
    ax.set_ylabel("close")
    handles, _ = ax.get_legend_handles_labels()
    _legend_outside(ax, handles + regime_handles, x=1.09)  # right of the position axis
    if "position" in rollout:
        twin = ax.twinx()
        twin.step(
            stamps, rollout["position"].to_numpy(dtype=np.float64), where="post", color="#1f77b4", lw=1.0, alpha=0.8
        )
        twin.set_ylabel(f"{name} position (units)", color="#1f77b4")


def action_shares(actions: np.ndarray, window: int, hold_threshold: float) -> pd.DataFrame:
    """Share of each ``ACTION_BUCKETS`` bucket over the trailing ``window`` raw actions."""
    buckets = bucketize(actions, hold_threshold=hold_threshold)
    one_hot = pd.DataFrame(np.eye(len(ACTION_BUCKETS))[buckets], columns=list(ACTION_BUCKETS))
    return one_hot.rolling(window, min_periods=1).mean()


def draw_actions(ax: Axes, section: TearsheetSection, window: int, hold_threshold: float) -> None:
    name, rollout = section.primary
    window = rolling_window(len(rollout), window)
    shares = action_shares(rollout["action_raw"].to_numpy(dtype=np.float64), window, hold_threshold)
    ax.stackplot(
        _timestamps(rollout), shares.T.to_numpy(), labels=list(ACTION_BUCKETS), colors=BUCKET_COLOURS, alpha=0.9
    )
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel(f"{name}: share, {window}-bar window")
    _legend_outside(ax)


def _legend_outside(ax: Axes, handles: list | None = None, x: float = 1.01) -> None:
    """The legend right of the axes, where it covers no line; long labels wrapped to fit there."""
    if handles is None:
        handles, _ = ax.get_legend_handles_labels()
    labels = [textwrap.fill(str(h.get_label()), LEGEND_WIDTH) for h in handles]
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(x, 1.0), fontsize=LEGEND_FONT, borderaxespad=0.0)


def draw_distribution(ax: Axes, section: TearsheetSection) -> None:
    """Histogram of the primary agent's per-bar returns over capped buy-and-hold's, on shared bins."""
    counts = return_histogram(section)
    width = float(np.diff(counts.index.to_numpy()).mean()) if len(counts) > 1 else 1.0
    colours = [next(iter(_agent_colours(section).values())), "black"]
    for (name, column), colour in zip(counts.items(), colours):
        ax.bar(counts.index, column, width=width, align="edge", alpha=0.45, color=colour, label=str(name))
    ax.axvline(0.0, color="grey", lw=0.8)
    ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.set_ylabel("bars")
    _legend_outside(ax)


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


def draw_metrics(ax: Axes, table: pd.DataFrame) -> None:
    shown = formatted_table(table)
    ax.axis("off")
    cell = ax.table(
        cellText=shown.to_numpy(),
        rowLabels=[str(i)[:38] for i in shown.index],
        colLabels=list(shown.columns),
        cellLoc="right",
        bbox=Bbox.from_bounds(0.27, 0.0, 0.73, 1.0),
    )
    cell.auto_set_font_size(False)
    cell.set_fontsize(LEGEND_FONT)


@dataclass(frozen=True, kw_only=True)
class TearsheetParams(Section):
    """The ``tearsheet`` parameter section."""

    rolling_window: int = setting(63, interval="[2, inf)")  # bars of the rolling Sharpe / action shares
    dpi: int = setting(100, interval="[2, inf)")  # resolution of the panels embedded in the page


@dataclass(frozen=True)
class TearsheetOptions:
    hold_threshold: float  # the env's (``EnvSpec.env_config``)
    rolling_window: int = TearsheetParams().rolling_window
    dpi: int = TearsheetParams().dpi


def _draw(key: str, ax: Axes, section: TearsheetSection, table: pd.DataFrame, options: TearsheetOptions) -> None:
    if key == "equity":
        draw_equity(ax, section)
    elif key == "drawdown":
        draw_drawdown(ax, section)
    elif key == "rolling_sharpe":
        draw_rolling_sharpe(ax, section, options.rolling_window)
    elif key == "trades":
        draw_trades(ax, section)
    elif key == "actions":
        draw_actions(ax, section, options.rolling_window, options.hold_threshold)
    elif key == "distribution":
        draw_distribution(ax, section)
    else:
        draw_metrics(ax, table)
    ax.tick_params(labelsize=TICK_FONT)
    ax.set_title(PANELS[key], fontsize=TITLE_FONT, loc="left")


def tearsheet_figure(section: TearsheetSection, table: pd.DataFrame, options: TearsheetOptions) -> Figure:
    """Every panel of one section in one figure (the versioned PNG)."""
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(11, 3.0 * len(PANELS)))
    # fixed margins: a layout engine (tight/constrained) measures every label and costs seconds
    fig.subplots_adjust(left=0.08, right=PANEL_RIGHT, top=TITLE_TOP - 0.015, bottom=0.02, hspace=0.45)
    for ax, key in zip(axes, PANELS):
        _draw(key, ax, section, table, options)
    fig.suptitle(section.title, fontsize=13, y=0.995)
    return fig


def panel_images(fig: Figure, dpi: int) -> dict[str, str]:
    """Each chart panel of ``tearsheet_figure``'s figure as a base64 PNG: one rendering at ``dpi``,
    cut into full-width bands halfway between neighbouring panels (drawing every panel again on its
    own figure, or measuring each panel's extent, would double the time)."""
    from PIL import Image

    original_dpi = fig.dpi
    fig.set_dpi(dpi)
    canvas = fig.canvas
    if not isinstance(canvas, FigureCanvasAgg):
        raise RuntimeError(f"tearsheet images need an Agg-based matplotlib backend, got {type(canvas).__name__}")
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())
    height = pixels.shape[0]
    boxes = [ax.get_position() for ax in fig.axes[: len(PANELS)]]
    tops = [TITLE_TOP] + [(upper.y0 + lower.y1) / 2 for upper, lower in zip(boxes, boxes[1:])]
    bottoms = tops[1:] + [0.0]
    images = {}
    for key, top, bottom in zip(PANELS, tops, bottoms):
        if key == "metrics":  # the page has it as an HTML table
            continue
        buffer = io.BytesIO()
        Image.fromarray(pixels[int((1 - top) * height) : int((1 - bottom) * height)]).save(buffer, format="png")
        images[key] = base64.b64encode(buffer.getvalue()).decode("ascii")
    fig.set_dpi(original_dpi)
    return images


_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222}
h1{font-size:1.6em}h2{font-size:1.35em;border-bottom:1px solid #ccc}h3{font-size:1.15em;margin-bottom:.2em}
table.metrics{border-collapse:collapse;font-size:.95em}table.header th{text-align:left}
table.metrics td,table.metrics th{padding:.2em .6em;
border-bottom:1px solid #eee;text-align:right}img{max-width:100%}.notes{color:#555;font-size:.9em}
.warning{color:#b2182b;font-weight:bold}
"""


def section_facts(section: TearsheetSection) -> dict[str, str]:
    """The section's header: symbol, first and last bar of the primary rollout, then its own facts."""
    stamps = _timestamps(section.primary[1])
    return {
        "symbol": section.symbol,
        "bars": f"{stamps[0].date()} .. {stamps[-1].date()} ({len(stamps)} bars)",
        **section.facts,
    }


def section_html(section: TearsheetSection, table: pd.DataFrame, images: Mapping[str, str]) -> str:
    """One section: its header, every chart panel (``panel_images``) under its title, the metrics as
    an HTML table, then the ``STATISTICS_BLOCKS``."""
    parts = [f'<section class="tearsheet-section"><h2>{html.escape(section.title)}</h2>']
    parts.append(header_html(section_facts(section)))
    if section.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in section.notes) + "</ul>")
    for key, title in PANELS.items():
        parts.append(f'<div class="panel" data-panel="{key}"><h3>{html.escape(title)}</h3>')
        if key == "metrics":
            parts.append(formatted_table(table).to_html(classes="metrics", border=0, escape=True))
        else:
            parts.append(f'<img alt="{html.escape(title)}" src="data:image/png;base64,{images[key]}">')
        parts.append("</div>")
    parts.append(attribution_html(section))
    for key, (title, block) in STATISTICS_BLOCKS.items():
        parts.append(f'<div class="block" data-block="{key}"><h3>{html.escape(title)}</h3>{block(section)}</div>')
    parts.append("</section>")
    return "\n".join(parts)


def file_stem(title: str) -> str:
    """A section title as a file name: runs of anything but letters, digits, ``-`` and ``.`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", title).strip("_")


@dataclass
class Tearsheet:
    """What a tearsheet step saves: the rollouts, one figure per section and the HTML page."""

    rollouts: pd.DataFrame
    figures: dict[str, Figure]
    html: str
    tables: dict[str, pd.DataFrame]


def build_tearsheet(
    title: str,
    sections: Sequence[TearsheetSection],
    options: TearsheetOptions,
    trials: Mapping[str, Trials] | None = None,
    header: Mapping[str, object] | None = None,
    verdicts: Sequence[Verdict] = (),
) -> Tearsheet:
    """Rollout table, per-section figures (keyed ``<file_stem(section title)>.png``) and the self-contained HTML;
    ``trials`` per symbol (from the trial ledger) deflate the agents' Sharpe ratios (DSR); ``verdicts``
    (the phase's gates, collapse, forward alerts) make the PASS / FAIL / NOT CHECKED banner on top."""
    if not sections:
        raise ValueError(f"tearsheet {title!r} has no section")
    trials = trials or {}
    tables = {s.title: metrics_table(s, options.hold_threshold, trials.get(s.symbol)) for s in sections}
    figures = {s.title: tearsheet_figure(s, tables[s.title], options) for s in sections}
    facts = "".join(f"<li><b>{html.escape(str(k))}</b>: {html.escape(str(v))}</li>" for k, v in (header or {}).items())
    counted = ", ".join(f"{s.symbol}: {trials[s.symbol].n if s.symbol in trials else 0}" for s in sections)
    dsr_note = (
        "DSR deflates each agent's Sharpe by the configurations the trial ledger counts per symbol "
        f"({counted}); it is n/a with fewer than 2."
    )
    body = "\n".join(section_html(s, tables[s.title], panel_images(figures[s.title], options.dpi)) for s in sections)
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>\n<h1>{html.escape(title)}</h1>\n{banner_html(verdicts)}\n"
        f'<ul class="notes">{facts}'
        f"<li>PSR: probability that the true Sharpe exceeds 0. {html.escape(dsr_note)}</li></ul>\n"
        f"{body}\n</body></html>\n"
    )
    return Tearsheet(
        rollouts=rollout_table(sections),
        figures={f"{file_stem(title)}.png": figure for title, figure in figures.items()},
        html=page,
        tables=tables,
    )
