"""The committed ledger (docs/results/trial_ledger) reproduces every trial count and DSR that
docs/results.md cites: the section is named next to each number. A run whose rows are added to the
committed ledger changes these counts, and this test names the section to update."""

from __future__ import annotations

from pathlib import Path

import pytest

from trading_rl.evaluation.ledger.ledger import Period, deflated_sharpe, read_ledger, trials_for
from trading_rl.evaluation.metrics.metrics import MOMENT_KEYS, psr_from_moments

LEDGER = read_ledger(Path(__file__).resolve().parents[3] / "docs" / "results" / "trial_ledger")
WALK_FORWARD = Period.of("2013-01-11", "2015-12-31")  # the 3 windows ending at the validation end
VALIDATION = Period.of("2013-04-02", "2015-12-31")
TEST = Period.of("2016-04-01", "2018-12-31")
PREVIOUS_DEFAULT_RUN = "2026-11-26T07:30"  # §4 "Previous default run": its rows' time


def _moments(row) -> dict:
    return {key: row[key] for key in MOMENT_KEYS}


def test_section_0_and_0b_rows():
    curve = LEDGER[LEDGER["source"] == "learning_curve"]
    assert len(curve[curve["git_commit"].str.startswith("b2a420b")]) == 8  # §0: "the 8 configurations"
    assert len(curve[curve["git_commit"].str.startswith("7bbd058")]) == 16  # §0b: "16 ledger rows"


def test_section_4_walk_forward_counts_and_dsr():
    earlier = LEDGER[LEDGER["timestamp"] <= PREVIOUS_DEFAULT_RUN]
    assert trials_for(earlier, "sp500", WALK_FORWARD).n == 5 and trials_for(earlier, "nasdaq", WALK_FORWARD).n == 5
    today = {symbol: trials_for(LEDGER, symbol, WALK_FORWARD) for symbol in ("sp500", "nasdaq")}
    assert today["sp500"].n == 29 and today["sp500"].by_source == {"learning_curve": 20, "walk_forward": 9}
    assert today["sp500"].variance == pytest.approx(2.70e-4, abs=5e-7)
    assert today["nasdaq"].n == 6 and today["nasdaq"].by_source == {"learning_curve": 4, "walk_forward": 2}
    assert today["nasdaq"].variance == pytest.approx(4.81e-4, abs=5e-7)
    default_run = LEDGER[(LEDGER["source"] == "walk_forward") & (LEDGER["timestamp"] <= PREVIOUS_DEFAULT_RUN)]
    dsr = {row["symbol"]: deflated_sharpe(_moments(row), today[row["symbol"]]) for _, row in default_run.iterrows()}
    assert round(dsr["sp500"], 2) == 0.60 and round(dsr["nasdaq"], 2) == 0.42


def test_section_6_final_evaluation_against_the_test_looks():
    trials = trials_for(LEDGER, "sp500", TEST)
    assert trials.n == 3 and trials.by_source == {"final_evaluation": 1, "ab_sac_icm": 2}
    assert trials.variance == pytest.approx(2.74e-4, abs=5e-7)
    final = LEDGER[LEDGER["source"] == "final_evaluation"].iloc[0]
    assert final["config_hash"] == "c5366b32ede114c9"
    assert round(psr_from_moments(_moments(final)), 2) == 0.92
    assert round(deflated_sharpe(_moments(final), trials), 2) == 0.85


def test_the_validation_split_holds_the_recorded_ab_trials():
    # docs/protocol.md: N on sp500's validation split = these 4 + 24 documented pre-ledger trials.
    assert trials_for(LEDGER, "sp500", VALIDATION).n == 4


def test_research_walk_forward_rows_are_the_configurations_the_real_data_table_shows():
    # results.md "Real data": "Five configurations per symbol on this period are five ledger rows each"
    research = Period.of("2004-02-04", "2015-12-31")
    for symbol in ("sp500", "nasdaq"):
        trials = trials_for(LEDGER, symbol, research)
        assert trials.n == 5 and trials.by_source == {"walk_forward": 5}, symbol
