"""The tearsheet: every panel in the PNG and the HTML, numbers from the rollouts, a window without
trades said so, and the page rendering in headless Chromium (each page kind with its banner, header
and statistics blocks)."""

import functools
import shutil
import subprocess
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from arch.data import sp500
from helpers.seeds_env import seeds_env_config

from trading_rl.envs import build_env_spec
from trading_rl.evaluation.ledger.ledger import Trials
from trading_rl.evaluation.metrics.attribution import rollout_attribution
from trading_rl.evaluation.metrics.baselines import constant_policy, random_policy
from trading_rl.evaluation.metrics.metrics import compute_metrics
from trading_rl.evaluation.metrics.rollout import run_episode
from trading_rl.evaluation.reporting.tearsheet import Verdict, banner_html, build_tearsheet
from trading_rl.evaluation.reporting.tearsheet_metrics import attribution_table
from trading_rl.evaluation.reporting.tearsheet_panels import PANELS, TearsheetOptions
from trading_rl.evaluation.reporting.tearsheet_section import env_section
from trading_rl.evaluation.validation.regimes import RegimeParams

SPLITS = {
    "train": {"start": "2012-01-01", "end": "2014-12-31"},
    "validation": {"start": "2015-01-01", "end": "2015-04-30"},
    "test": {"start": "2015-07-01", "end": "2015-12-31"},
}


@pytest.fixture(scope="module")
def section():
    prices = sp500.load().loc["2011-01-01":"2015-12-31"].rename(columns=str.lower)[["open", "high", "low", "close"]]
    features = pd.DataFrame({"log_return": np.log(prices["close"]).diff() * 10}, index=prices.index).dropna()
    spec = build_env_spec("sp500", prices.loc[features.index], features, SPLITS, seeds_env_config(window_size=5), 252.0)
    make_env = functools.partial(spec.make_env, "validation")
    env = make_env()
    agents = {
        "agent": run_episode(env, random_policy(env.action_space, 3), seed=0),
        "idle agent": run_episode(make_env(), constant_policy(0.0, env.action_space), seed=0),
    }
    return env_section(
        "sp500 validation",
        "sp500",
        252.0,
        agents,
        make_env,
        spec.closes,
        0,
        RegimeParams(vol_lookback=60, trend_window=20),
    )


def test_every_panel_is_in_the_png_and_the_html(section):
    tearsheet = build_tearsheet(
        "t", [section], TearsheetOptions(0.1, rolling_window=20, dpi=40), {"sp500": Trials((0.1, -0.2, 0.05), {})}
    )
    (figure,) = tearsheet.figures.values()
    assert [ax.get_title(loc="left") for ax in figure.axes if ax.get_title(loc="left")] == list(PANELS.values())
    for key, title in PANELS.items():
        assert f'data-panel="{key}"><h3>{title}</h3>' in tearsheet.html
    assert tearsheet.html.count("data:image/png;base64,") == len(PANELS) - 1  # the metrics are an HTML table
    assert "<script" not in tearsheet.html and "http" not in tearsheet.html  # self-contained, offline
    assert list(tearsheet.figures) == ["sp500_validation.png"]


def test_metrics_come_from_the_rollouts_with_dsr_for_agents_only(section):
    tearsheet = build_tearsheet("t", [section], TearsheetOptions(0.1, dpi=30), {"sp500": Trials((0.1, -0.2, 0.05), {})})
    table = tearsheet.tables["sp500 validation"]
    expected = compute_metrics(section.agents["agent"], 252.0, 0.1)
    assert table.loc["agent", "sharpe"] == pytest.approx(expected["sharpe"])
    assert table.loc["agent", "psr"] == pytest.approx(expected["psr"])
    assert np.isfinite(table.loc["agent", "dsr"]) and np.isnan(table.loc["buy_and_hold", "dsr"])
    assert {"buy_and_hold", "cash", "random", "sma_crossover"} <= set(table.index)
    assert any(name.startswith("buy_and_hold_full (market") for name in table.index)
    rollouts = tearsheet.rollouts
    agent = rollouts[rollouts["agent"] == "agent"]
    assert agent["equity_index"].iloc[-1] == pytest.approx(1.0 + expected["total_return"])
    assert {"position", "action_raw", "trade_value", "fill_price"} <= set(rollouts.columns)


def test_the_attribution_block_measures_every_agent_and_baseline_against_the_market_line(section):
    table = attribution_table(section)
    assert set(table.index) == {"agent", "idle agent", "buy_and_hold", "cash", "random", "sma_crossover"}
    agent = section.agents["agent"]
    expected = rollout_attribution(
        agent, section.baselines["buy_and_hold_full"]["return"], periods_per_year=252.0, cost_rate=0.0003
    )
    assert section.cost_rate == pytest.approx(0.0003)  # the env's commission + slippage
    assert table.loc["agent", "alpha_annual"] == pytest.approx(expected.alpha_annual)
    assert table.loc["agent", "exposure_matched_sharpe"] == pytest.approx(expected.exposure_matched_sharpe)
    assert table.loc["cash", "beta"] == 0.0 and table.loc["idle agent", "mean_exposure"] == 0.0
    html = build_tearsheet("t", [section], TearsheetOptions(0.1, dpi=30)).html
    block = html[html.index('data-panel="attribution"') :]
    for heading in (
        "alpha/yr [90% CI]",
        "beta",
        "mean exposure",
        "timing corr",
        "Sharpe ± SE",
        "exposure-matched Sharpe",
    ):
        assert f"<th>{heading}</th>" in block
    low, high = expected.alpha_ci90
    assert f"{expected.alpha_annual:+.1%} [{low:+.1%}, {high:+.1%}]" in block
    assert "0.03% per unit traded" in block
    assert f"<td>{expected.sharpe:.2f} ± {expected.sharpe_se:.2f}</td>" in block


def test_a_window_without_trades_is_marked(section):
    idle_first = type(section)(
        section.title,
        section.symbol,
        section.periods_per_year,
        {"idle agent": section.agents["idle agent"]},
        section.baselines,
        section.close,
        section.regimes,
    )
    tearsheet = build_tearsheet("t", [idle_first], TearsheetOptions(0.1, dpi=30))
    trades_axis = next(
        ax for ax in tearsheet.figures["sp500_validation.png"].axes if ax.get_title(loc="left") == PANELS["trades"]
    )
    assert any("no trades: idle agent never filled an order" in text.get_text() for text in trades_axis.texts)


def test_bad_section_names_the_rollout(section):
    with pytest.raises(ValueError, match="rollout 'agent' lacks column\\(s\\) \\['return'\\]"):
        type(section)("s", "sp500", 252.0, {"agent": section.agents["agent"].drop(columns="return")}, {}, section.close)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium not installed (apt install chromium)")
def test_the_html_renders_in_headless_chromium(section, tmp_path):
    from PIL import Image

    tearsheet = build_tearsheet("tearsheet", [section], TearsheetOptions(0.1, dpi=80))
    page = tmp_path / "tearsheet.html"
    page.write_text(tearsheet.html)
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=1100,2200",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    assert pixels.shape == (2200, 1100)
    # the five chart panels (about 300 pixels each) and the table fill the page: no 250-pixel band
    # of its upper 1750 pixels is blank
    bands = pixels[:1750].reshape(7, 250, 1100)
    assert all(band.std() > 5.0 for band in bands), [round(band.std(), 1) for band in bands]


@pytest.mark.parametrize(
    ("verdicts", "overall"),
    [
        ([Verdict("a", True, "")], "PASS"),
        ([Verdict("a", True, ""), Verdict("b", False, "dominance 0.99")], "FAIL"),
        ([Verdict("forward_alerts", None, "no version carries alias @champion")], "NOT CHECKED"),
    ],
)
def test_the_banner_says_pass_fail_or_not_checked_with_each_verdict(verdicts, overall):
    page = banner_html(verdicts)
    assert f'data-verdict="{overall}"' in page and f">{overall}</span>" in page
    for verdict in verdicts:
        assert verdict.name in page and verdict.detail in page
    assert banner_html([]) == ""


BANNER_COLOURS = {"PASS": (0x1A, 0x98, 0x50), "FAIL": (0xB2, 0x18, 0x2B), "NOT CHECKED": (0x8C, 0x6D, 0x1F)}
PAGE_KINDS = {  # a training phase's page, a page of several sections, the forward page
    "FAIL": [Verdict("sac_icm_collapse_report", False, "deterministic: dominance")],
    "PASS": [Verdict("option_usage_report", True, "")],
    "NOT CHECKED": [Verdict("forward_alerts", None, "no version of 'trading_rl_sac_icm' carries alias @champion")],
}


def _screenshot(page_html: str, tmp_path, height: int) -> np.ndarray:
    from PIL import Image

    page, shot = tmp_path / "page.html", tmp_path / "shot.png"
    page.write_text(page_html)
    subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={shot}"]
        + [f"--window-size=1100,{height}", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium not installed (apt install chromium)")
@pytest.mark.parametrize("overall", list(PAGE_KINDS))
def test_each_page_kind_shows_its_banner_header_and_statistics_in_chromium(section, tmp_path, overall):
    sections = [section, replace(section, title="sp500 second window")] if overall == "PASS" else [section]
    tearsheet = build_tearsheet("tearsheet", sections, TearsheetOptions(0.1, dpi=60), None, {}, PAGE_KINDS[overall])
    for key in ("monthly_returns", "drawdowns", "distribution", "trades"):
        assert tearsheet.html.count(f'data-block="{key}"') == len(sections)
    assert tearsheet.html.count('<table class="metrics header">') == len(sections)
    pixels = _screenshot(tearsheet.html, tmp_path, 4800)
    # the banner's border and word in its colour near the top of the page
    colour = np.array(BANNER_COLOURS[overall])
    near = (np.abs(pixels[:250] - colour).max(axis=2) < 12).sum()
    assert near > 2000, near
    # the statistics blocks under the panels are drawn: no blank 200-pixel band down to 3400 pixels
    # (one section at dpi 60 ends at about 3500: header, seven panels, the metrics, four blocks)
    grey = pixels.mean(axis=2)
    bands = grey[:3400].reshape(17, 200, 1100)
    assert all(band.std() > 3.0 for band in bands), [round(band.std(), 1) for band in bands]
