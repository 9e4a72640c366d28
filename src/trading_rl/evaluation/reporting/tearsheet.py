"""The tearsheet of a trained agent: its rollout next to every baseline, as one PNG and one
self-contained HTML page.

Library choice (docs/tearsheets.md): matplotlib only. quantstats/pyfolio draw returns-only
tearsheets (no positions over price, no regimes, no action shares) and pull in yfinance, seaborn
and IPython; plotly's self-contained HTML carries ~4 MB of inline JavaScript per file. The panels
are drawn once per axis with matplotlib (already a dependency), and the HTML embeds the panels as
base64 PNGs next to a real HTML metrics table, so it opens offline in any browser.

This module assembles the page: per section (``tearsheet_section``) its header, the panels
(``tearsheet_panels``), the metrics and attribution tables (``tearsheet_metrics``) and the
statistics blocks (``tearsheet_statistics``); over them the page's title, verdict banner and notes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from trading_rl.evaluation.ledger.ledger import Trials
from trading_rl.evaluation.reporting.tearsheet_metrics import attribution_html, formatted_table, metrics_table
from trading_rl.evaluation.reporting.tearsheet_panels import PANELS, TearsheetOptions, panel_images, tearsheet_figure
from trading_rl.evaluation.reporting.tearsheet_section import TearsheetSection, rollout_table, rollout_timestamps
from trading_rl.evaluation.reporting.tearsheet_statistics import STATISTICS_BLOCKS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Marks the page of a phase with nothing to show (e.g. forward without new bars): the run summary
# does not list it as a tearsheet.
EMPTY_PAGE_MARK = '<meta name="trading-rl-tearsheet" content="empty">'


def tearsheet_outputs(prefix: str) -> list[str]:
    """The datasets a phase's tearsheet is saved as: its rollouts, its PNGs and its HTML page."""
    return [f"{prefix}_rollout", f"{prefix}_tearsheet_plot", f"{prefix}_tearsheet"]


@dataclass(frozen=True)
class Verdict:
    """One line of the banner: a gate report's outcome (``passed`` None: not checked)."""

    name: str
    passed: bool | None
    detail: str


def banner_html(verdicts: Sequence[Verdict]) -> str:
    """PASS (every verdict passed), FAIL (any failed) or NOT CHECKED, with one line per verdict."""
    if not verdicts:
        return ""
    states = [v.passed for v in verdicts]
    overall = "FAIL" if False in states else "NOT CHECKED" if None in states else "PASS"
    colour = {"PASS": "#1a9850", "FAIL": "#b2182b", "NOT CHECKED": "#8c6d1f"}[overall]
    lines = "".join(
        f"<li><b>{html.escape(v.name)}</b>: "
        f"{'passed' if v.passed else 'FAILED' if v.passed is False else 'not checked'}"
        + (f" ({html.escape(v.detail)})" if v.detail else "")
        + "</li>"
        for v in verdicts
    )
    return (
        f'<div class="banner" data-verdict="{overall}" style="border:3px solid {colour};padding:.4em 1em;'
        f'margin:.5em 0"><span style="color:{colour};font-size:1.6em;font-weight:bold">{overall}</span>'
        f"<ul>{lines}</ul></div>"
    )


def header_html(facts: Mapping[str, Any]) -> str:
    """A section's header (``section_facts``): one row per fact."""
    cells = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in facts.items())
    return f'<table class="metrics header">{cells}</table>'


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
    stamps = rollout_timestamps(section.primary[1])
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
