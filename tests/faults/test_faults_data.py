"""Fault suite, bad data that passes the price schema: each case runs ``feature_extraction`` in a
Kedro session on a project whose previous run completed, and checks that the error names the symbol,
the bars and the fix, and that nothing a later run would load has changed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers.manifest_faults_setup import (
    GOOD_BARS,
    assert_no_run_completed,
    assert_unchanged,
    completed_runs,
    copy_project,
    good_prices,
    run_session,
    snapshot,
    write_prices,
)

pytestmark = pytest.mark.slow
TICK_BAR = 200  # 1999-10-19, inside the training split (train_end 2000-06-30)


@pytest.fixture
def project(good_project, tmp_path) -> Path:
    return copy_project(good_project, tmp_path / "project")


def _constant(frame: pd.DataFrame) -> pd.DataFrame:
    frame[["Open", "High", "Low", "Close"]] = 100.0
    return frame


def _tick_at(factor: float, bar: int):
    def corrupt(frame: pd.DataFrame) -> pd.DataFrame:
        frame.iloc[bar, :4] = frame.iloc[bar, :4] * factor
        return frame

    return corrupt


def _tick(factor: float):
    return _tick_at(factor, TICK_BAR)


def _flat_training_window(frame: pd.DataFrame) -> pd.DataFrame:
    frame.loc[:"2000-06-30", ["Open", "High", "Low", "Close"]] = 1400.0
    return frame


GARCH_CASES = {
    "constant_prices": (_constant, "constant"),
    "flat_training_window": (_flat_training_window, "constant"),
}


@pytest.mark.parametrize("case", sorted(GARCH_CASES))
def test_garch_fault_names_symbol_bars_and_fix(project, case):
    corrupt, cause = GARCH_CASES[case]
    write_prices(project, corrupt(good_prices()))
    before, runs_before = snapshot(project), completed_runs(project)
    with pytest.raises(Exception) as raised:
        run_session(project, ["feature_extraction", "env_construction"])
    message = str(raised.value)
    for expected in (
        "'GOOD'",
        "1999-01-05 .. 2000-06-30",
        cause,
        "garch: null",
        "exclude the symbol",
        "repair the bar",
    ):
        assert expected in message, (expected, message)
    assert_no_run_completed(project, before, runs_before)


def _split(ratio: float, from_bar: int):
    def corrupt(frame: pd.DataFrame) -> pd.DataFrame:
        frame.iloc[from_bar:, :4] = frame.iloc[from_bar:, :4] * ratio
        return frame

    return corrupt


# One rule for every bar of every split (splits: train .. 2000-06-30, validation .. 2000-12-31, test).
# Before it, only the training split was checked (by the GARCH fit): the others passed with exit 0.
BAD_BAR_CASES = {
    "tick_1000x_up_train": (_tick(1000.0), "1999-10-19", "a bad tick"),
    "tick_1000x_down_train": (_tick(0.001), "1999-10-19", "a bad tick"),
    "tick_10x_up_train": (_tick(10.0), "1999-10-19", "a bad tick"),
    "tick_1000x_validation": (_tick_at(1000.0, 400), "2000-08-03", "a bad tick"),
    "tick_1000x_test": (_tick_at(1000.0, 600), "2001-05-21", "a bad tick"),
    "tick_1000x_last_bar": (_tick_at(1000.0, GOOD_BARS - 1), "2001-10-16", "a bad tick or an unadjusted split"),
    "unadjusted_4_to_1_split_test": (_split(0.25, 600), "2001-05-21", "unadjusted split"),
}


@pytest.mark.parametrize("case", sorted(BAD_BAR_CASES))
def test_a_bad_bar_in_any_split_is_refused_before_anything_is_written(project, case):
    corrupt, stamp, cause = BAD_BAR_CASES[case]
    write_prices(project, corrupt(good_prices()))
    before = snapshot(project)
    with pytest.raises(Exception) as raised:
        run_session(project, ["feature_extraction", "env_construction"])
    message = str(raised.value)
    for expected in ("symbol 'GOOD'", "GOOD", stamp, cause, "robust z", "Nothing was written", "Fix: repair the bar"):
        assert expected in message, (expected, message)
    assert_unchanged(project, before)


def test_a_bad_bar_names_the_bad_symbol_among_good_ones(project):
    (project / "conf/local/parameters_feature_extraction.yml").write_text(
        "feature_extraction:\n  symbols:\n    - {name: GOOD, source: file}\n    - {name: BAD, source: file}\n"
        '  splits: {train_end: "2000-06-30", validation_end: "2000-12-31"}\nenv_construction:\n  symbol: GOOD\n'
    )
    write_prices(project, _tick(1000.0)(good_prices()), symbol="BAD")
    before = snapshot(project)
    with pytest.raises(Exception, match="symbol 'BAD'.*1999-10-19.*Fix: repair the bar"):
        run_session(project, ["feature_extraction"])
    assert_unchanged(project, before)


def _with_dates(frame: pd.DataFrame, dates: list[str]) -> pd.DataFrame:
    return frame.iloc[: len(dates)].set_axis(pd.Index(dates, name="Date"))


def _mixed_offsets(frame: pd.DataFrame) -> pd.DataFrame:
    stamps = [f"{day:%Y-%m-%d} 16:00:00" + ("-05:00" if i % 2 else "") for i, day in enumerate(frame.index)]
    return frame.set_axis(pd.Index(stamps, name="Date"))


def _zulu_and_naive(frame: pd.DataFrame) -> pd.DataFrame:
    stamps = [f"{day:%Y-%m-%d}T21:00" + ("Z" if i < 300 else "") for i, day in enumerate(frame.index)]
    return frame.set_axis(pd.Index(stamps, name="Date"))


def _day_first(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.set_axis(pd.Index([f"{day:%d/%m/%Y}" for day in frame.index], name="Date"))


def _mixed_formats(frame: pd.DataFrame) -> pd.DataFrame:
    stamps = [f"{day:%Y-%m-%d}" if i < 350 else f"{day:%m/%d/%Y}" for i, day in enumerate(frame.index)]
    return frame.set_axis(pd.Index(stamps, name="Date"))


TIMESTAMP_CASES = {
    "mixed_utc_offsets": (
        _mixed_offsets,
        ["mixes time zones", "row 1: '1999-01-05 16:00:00-05:00'", "row 0: '1999-01-04 16:00:00'"],
    ),
    "zulu_and_naive": (_zulu_and_naive, ["mixes time zones", "row 0: '1999-01-04T21:00Z'", "row 300:"]),
    "day_first_dates": (_day_first, ["day-first", "%d/%m/%Y", "row 7: '13/01/1999'", "ISO yyyy-mm-dd"]),
    "mixed_formats": (_mixed_formats, ["mixes timestamp formats", "%Y-%m-%d", "row 350:", "one format"]),
}


@pytest.mark.parametrize("case", sorted(TIMESTAMP_CASES))
def test_timestamp_fault_shows_rows_and_likely_cause(project, case):
    corrupt, expected_parts = TIMESTAMP_CASES[case]
    (project / "data/01_raw/prices/GOOD.csv").write_text(corrupt(good_prices()).to_csv())
    before = snapshot(project)
    with pytest.raises(Exception) as raised:
        run_session(project, ["feature_extraction"])
    message = str(raised.value)
    assert "GOOD.csv" in message and "column 'Date'" in message, message
    for expected in expected_parts:
        assert expected in message, (expected, message)
    assert_unchanged(project, before)
