"""Fault suite, forward reruns: a bad new bar is never scored, and a stored record that was edited,
garbled, stripped of a column or scored from bars later corrected is named by its version, with the
command that goes back or supersedes it. Runs the forward pipeline of tests/pipelines/forward."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers.forward_setup import TRAINED_BARS, deploy, market, rerun, versions, write_prices

from trading_rl.data.bad_bars import BadBarError
from trading_rl.phases.forward import ForwardRecordError

pytestmark = pytest.mark.slow
RECORD = "data/07_model_output/forward_record.parquet"
RUNS = ["2026-03-01T06.00.00.000Z", "2026-03-02T06.00.00.000Z", "2026-03-03T06.00.00.000Z"]
CLOSE = ["open", "high", "low", "close"]


@pytest.fixture(scope="module")
def deployed(tmp_path_factory) -> Path:
    """A deployed model and two record versions: 10 and 20 forward bars."""
    root = tmp_path_factory.mktemp("forward_faults")
    write_prices(root, market(TRAINED_BARS))
    deploy(root, "2026-02-28T06.00.00.000Z")
    for run, bars in zip(RUNS[:2], (10, 20)):
        write_prices(root, market(TRAINED_BARS + bars))
        rerun(root, run)
    return root


@pytest.fixture
def root(deployed, tmp_path) -> Path:
    import shutil

    return Path(shutil.copytree(deployed, tmp_path / "root"))


def _record_files(root: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in versions(root, RECORD)}


def _bad_new_bar(factor: float, from_bar: int, to_bar: int | None = None) -> pd.DataFrame:
    prices = market(TRAINED_BARS + 25)
    prices.iloc[from_bar:to_bar, [prices.columns.get_loc(c) for c in CLOSE]] *= factor
    return prices


@pytest.mark.parametrize(
    ("case", "prices", "cause"),
    [
        ("tick_x1000_last_bar", _bad_new_bar(1000.0, -1), "a bad tick or an unadjusted split"),
        ("tick_x1000_new_bar", _bad_new_bar(1000.0, TRAINED_BARS + 22, TRAINED_BARS + 23), "a bad tick"),
        ("unadjusted_4_to_1_split", _bad_new_bar(0.25, TRAINED_BARS + 22), "unadjusted split"),
    ],
)
def test_a_bad_new_bar_is_refused_before_it_is_scored(root, case, prices, cause):
    write_prices(root, prices)
    before = _record_files(root)
    with pytest.raises(BadBarError) as raised:
        rerun(root, RUNS[2])
    message = str(raised.value)
    stamp = prices.index[TRAINED_BARS + 22 if case != "tick_x1000_last_bar" else -1]
    for expected in ("symbol 'SYN'", str(stamp.date()), cause, "robust z", "close ", "Fix: repair the bar"):
        assert expected in message, (expected, message)
    assert _record_files(root) == before


def _edit_newest_record(root: Path, edit) -> str:
    path = versions(root, RECORD)[-1]
    edit(path)
    return path.parent.name


def _equity_edited(path: Path) -> None:
    record = pd.read_parquet(path)
    record.loc[3, "equity"] *= 1.5
    record.to_parquet(path)


def _fees_dropped(path: Path) -> None:
    pd.read_parquet(path).drop(columns="fees").to_parquet(path)


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a parquet file at all")


@pytest.mark.parametrize(
    ("edit", "cause"),
    [
        (_equity_edited, "column 'equity'"),
        (_fees_dropped, "lacks column(s) ['fees']"),
        (_garbage, "is not a readable parquet table"),
    ],
)
def test_a_broken_stored_record_is_named_with_its_version_and_the_way_back(root, edit, cause):
    write_prices(root, market(TRAINED_BARS + 25))
    version = _edit_newest_record(root, edit)
    before = _record_files(root)
    with pytest.raises(ForwardRecordError) as raised:
        rerun(root, RUNS[2])
    message = str(raised.value)
    for expected in (
        cause,
        f"'previous_forward_record', version {version}",
        f"--load-versions previous_forward_record:{RUNS[0]}",
        "forward.supersede_record=true",
    ):
        assert expected in message, (expected, message)
    assert _record_files(root) == before


def test_a_record_scored_from_bars_later_corrected_is_superseded_by_the_documented_command(root):
    """Bars the record scored were corrected in the file: the rerun refuses to continue it, and
    ``--params forward.supersede_record=true`` writes a record replayed from the corrected file."""
    corrected = market(TRAINED_BARS + 25)
    corrected.iloc[TRAINED_BARS + 5, corrected.columns.get_loc("close")] *= 0.999
    write_prices(root, corrected)
    with pytest.raises(ForwardRecordError, match="scored bars that were later corrected"):
        rerun(root, RUNS[2])
    rerun(root, RUNS[2], forward={"supersede_record": True})
    newest = pd.read_parquet(versions(root, RECORD)[-1])
    assert len(newest) == 25 and set(newest["scored_in"]) == {RUNS[2]}
    assert [len(pd.read_parquet(path)) for path in versions(root, RECORD)] == [10, 20, 25]


def test_the_way_back_named_in_the_refusal_continues_the_older_record(root):
    """``--load-versions previous_forward_record:<older>``, the command a garbled newest record's
    refusal names, continues the older record: its bars kept, the rest scored by this run."""
    write_prices(root, market(TRAINED_BARS + 25))
    _edit_newest_record(root, _garbage)
    rerun(root, RUNS[2], load_versions={"previous_forward_record": RUNS[0]})
    newest = pd.read_parquet(versions(root, RECORD)[-1])
    assert len(newest) == 25
    assert list(newest["scored_in"]) == [RUNS[0]] * 10 + [RUNS[2]] * 15


def test_a_garbage_record_without_an_older_version_is_superseded_not_a_dead_end(root):
    """With no older version there is no way back to name: the refusal names the supersede command
    alone, and that command writes a record replayed from the price file."""
    import shutil

    shutil.rmtree(versions(root, RECORD)[0].parent)
    write_prices(root, market(TRAINED_BARS + 25))
    version = _edit_newest_record(root, _garbage)
    with pytest.raises(ForwardRecordError) as raised:
        rerun(root, RUNS[2])
    message = str(raised.value)
    assert f"version {version}" in message and "forward.supersede_record=true" in message, message
    assert "--load-versions" not in message, message
    rerun(root, RUNS[2], forward={"supersede_record": True})
    newest = pd.read_parquet(versions(root, RECORD)[-1])
    assert len(newest) == 25 and set(newest["scored_in"]) == {RUNS[2]}
