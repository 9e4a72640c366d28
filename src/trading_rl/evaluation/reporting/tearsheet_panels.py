"""The tearsheet's figure: one section's panels drawn once per axis with matplotlib (equity against
every baseline, underwater drawdown, rolling Sharpe, trades over price shaded by regime, action
shares, the return histogram, the metrics table), and ``panel_images``, the chart panels cut out of
one rendering as the page's base64 PNGs. ``TearsheetParams`` / ``TearsheetOptions`` set them.
"""

from __future__ import annotations

import base64
import io
import math
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from trading_rl.config import Section, setting
from trading_rl.evaluation.metrics.baselines import MARKET
from trading_rl.evaluation.metrics.metrics import drawdown_series
from trading_rl.evaluation.reporting.plots import REFERENCE_LABELS, shade_regimes
from trading_rl.evaluation.reporting.tearsheet_metrics import formatted_table
from trading_rl.evaluation.reporting.tearsheet_section import TearsheetSection, rollout_returns, rollout_timestamps
from trading_rl.evaluation.reporting.tearsheet_statistics import return_histogram
from trading_rl.monitoring.actions import ACTION_BUCKETS, bucketize

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType

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


def _agent_colours(section: TearsheetSection) -> dict[str, ColorType]:
    # imported here: registering the pipelines (every kedro command) must not pay for it
    import matplotlib

    return dict(zip(section.agents, matplotlib.color_sequences["tab10"]))


def draw_equity(ax: Axes, section: TearsheetSection) -> None:
    """Agents thick and coloured on top, baselines thin, the market dashed, 1.0 under everything."""
    ax.axhline(1.0, color="lightgrey", lw=0.8, zorder=0)
    for name, rollout in section.baselines.items():
        colour, style = ("black", "--") if name == MARKET else BASELINE_STYLE.get(name, ("grey", "-"))
        ax.plot(
            rollout_timestamps(rollout),
            np.cumprod(1.0 + rollout_returns(rollout)),
            color=colour,
            ls=style,
            lw=1.1,
            zorder=1,
            label=REFERENCE_LABELS.get(name, name),
        )
    for name, agent_colour in _agent_colours(section).items():
        rollout = section.agents[name]
        ax.plot(
            rollout_timestamps(rollout),
            np.cumprod(1.0 + rollout_returns(rollout)),
            color=agent_colour,
            lw=2.2,
            zorder=3,
            label=name,
        )
    ax.set_yscale("log")  # the uncapped market line no longer squeezes the capped curves flat
    # imported here: registering the pipelines (every kedro command) must not pay for it
    import matplotlib.ticker

    plain = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:.3g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_ylabel("growth of 1 (log scale)")
    _legend_outside(ax)


def draw_drawdown(ax: Axes, section: TearsheetSection) -> None:
    for name, colour in _agent_colours(section).items():
        rollout = section.agents[name]
        drawdown = drawdown_series(rollout_returns(rollout))
        ax.fill_between(rollout_timestamps(rollout), drawdown, 0.0, color=colour, alpha=0.25, lw=0, zorder=2)
        ax.plot(rollout_timestamps(rollout), drawdown, color=colour, lw=1.6, zorder=3, label=name)
    if "buy_and_hold" in section.baselines:
        rollout = section.baselines["buy_and_hold"]
        ax.plot(
            rollout_timestamps(rollout),
            drawdown_series(rollout_returns(rollout)),
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
            rollout_timestamps(rollout),
            rolling_sharpe(rollout_returns(rollout), window, section.periods_per_year),
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
    stamps = rollout_timestamps(rollout)
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
        rollout_timestamps(rollout), shares.T.to_numpy(), labels=list(ACTION_BUCKETS), colors=BUCKET_COLOURS, alpha=0.9
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
    # imported here: registering the pipelines (every kedro command) must not pay for it
    import matplotlib.ticker

    ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.set_ylabel("bars")
    _legend_outside(ax)


def draw_metrics(ax: Axes, table: pd.DataFrame) -> None:
    shown = formatted_table(table)
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from matplotlib.transforms import Bbox

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
    # imported here: registering the pipelines (every kedro command) must not pay for it
    import matplotlib.pyplot as plt

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
    from matplotlib.backends.backend_agg import FigureCanvasAgg
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
