"""The decision log reader: the schema's fields read (extra keys, nested blocks and Signal's names
tolerated), a corrupt line left out and named with file, line and field while the others are
kept, and the tail read incrementally (a line still being written waits for its newline; a
replaced file is read again)."""

import json
import os
import re

import pytest
from helpers.dashboard_sources import append_lines, decision

from trading_rl.monitoring.dashboard.decisions import (
    DECISION_FIELDS,
    MAX_PROBLEMS,
    DecisionLogReader,
    read_decisions,
)


def test_every_schema_field_is_read_and_extra_keys_are_ignored(tmp_path):
    path = tmp_path / "decisions.jsonl"
    append_lines(path, decision("2024-01-02T21:00:00Z", 0.25, units=12.5, features={"x": 1}, latency_ms=3))
    log = read_decisions(path)
    assert log.exists and log.problems == [] and len(log.decisions) == 1
    row = log.decisions.iloc[0]
    assert {spec.name: row[spec.name] for spec in DECISION_FIELDS} == {
        "timestamp": "2024-01-02T21:00:00Z",
        "symbol": "AAA",
        "target_position": 0.25,
        "kind": "buy",
        "units": 12.5,
        "action_raw": 0.25,
        "action_smoothed": 0.25,
        "safeguard_verdict": "passed",
        "safeguard_rule": None,
        "confidence": 0.8,
        "model_version": "3",
    }
    assert row["line"] == 1 and str(row["time"]) == "2024-01-02 21:00:00+00:00"
    assert "features" not in log.decisions.columns


def test_nested_blocks_and_signal_names_are_read_and_optional_fields_may_be_absent(tmp_path):
    path = tmp_path / "decisions.jsonl"
    line = {
        "timestamp": "2024-01-02T21:00:00",
        "symbol": "BBB",
        "target_position": -0.5,
        "signal": {"kind": "sell", "units": -4},
        "raw_action": -0.7,
        "safeguard": {"verdict": "blocked", "rule": "max_position"},
        "model_version": 7,
    }
    append_lines(path, line)
    row = read_decisions(path).decisions.iloc[0]
    assert (row["kind"], row["units"], row["action_raw"]) == ("sell", -4.0, -0.7)
    assert (row["safeguard_verdict"], row["safeguard_rule"], row["model_version"]) == ("blocked", "max_position", "7")
    assert row["confidence"] is None and row["action_smoothed"] is None


@pytest.mark.parametrize(
    "bad_line, message",
    [
        (b"{not json", r"line 2 is not JSON"),
        (b"[1, 2]", r"line 2 is list, not a decision object"),
        (json.dumps({"timestamp": "2024-01-03T00:00:00", "symbol": "AAA"}).encode(), r"lacks field 'target_position'"),
        (
            json.dumps({"timestamp": "2024-01-03T00:00:00", "symbol": "AAA", "target_position": "big"}).encode(),
            r"field 'target_position' must be a finite number, got 'big'",
        ),
        (
            json.dumps({"timestamp": "yesterday", "symbol": "AAA", "target_position": 0.1}).encode(),
            r"field 'timestamp' must be ISO 8601 text, got 'yesterday'",
        ),
        (
            json.dumps({"timestamp": "2024-01-03T00:00:00", "symbol": "", "target_position": 0.1}).encode(),
            r"field 'symbol' must be non-empty text",
        ),
        (b"\xff\xfe garbage", r"line 2 is not JSON"),
    ],
)
def test_a_corrupt_line_is_named_and_left_out_and_the_others_are_kept(tmp_path, bad_line, message):
    path = tmp_path / "decisions.jsonl"
    append_lines(path, decision("2024-01-02T21:00:00", 0.1))
    with open(path, "ab") as file:
        file.write(bad_line + b"\n")
    append_lines(path, decision("2024-01-04T21:00:00", 0.2))
    log = read_decisions(path)
    assert list(log.decisions["line"]) == [1, 3]
    assert log.skipped == 1 and len(log.problems) == 1
    assert str(path) in log.problems[0] and "left out" in log.problems[0]
    assert re.search(message, log.problems[0]), log.problems[0]


def test_a_log_of_garbage_keeps_only_the_first_problems(tmp_path):
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b"garbage\n" * (MAX_PROBLEMS + 5))
    log = read_decisions(path)
    assert log.decisions.empty and log.skipped == MAX_PROBLEMS + 5 and len(log.problems) == MAX_PROBLEMS


def test_the_reader_keeps_the_newest_decisions_and_counts_them_all(tmp_path):
    path = tmp_path / "decisions.jsonl"
    append_lines(path, *(decision(f"2024-01-{day:02d}T21:00:00", day / 100) for day in range(1, 11)))
    log = DecisionLogReader(path, keep=3).read()
    assert log.count == 10 and list(log.decisions["line"]) == [8, 9, 10]


def test_a_missing_log_is_not_an_error(tmp_path):
    log = read_decisions(tmp_path / "none.jsonl")
    assert not log.exists and log.decisions.empty and log.problems == []


def test_the_reader_parses_only_appended_lines_and_waits_for_a_line_being_written(tmp_path):
    path = tmp_path / "decisions.jsonl"
    reader = DecisionLogReader(path)
    assert not reader.read().exists
    append_lines(path, decision("2024-01-02T21:00:00", 0.1))
    first = reader.read()
    assert list(first.decisions["target_position"]) == [0.1]
    half = json.dumps(decision("2024-01-03T21:00:00", 0.2))
    with open(path, "a") as file:
        file.write(half[:20])  # a writer in the middle of its line
    assert reader.read().decisions is first.decisions  # nothing new: not even re-built
    with open(path, "a") as file:
        file.write(half[20:] + "\n")
    assert list(reader.read().decisions["target_position"]) == [0.1, 0.2]
    assert reader._offset == os.path.getsize(path)


def test_a_replaced_or_shortened_log_is_read_from_its_start(tmp_path):
    path = tmp_path / "decisions.jsonl"
    reader = DecisionLogReader(path)
    append_lines(path, decision("2024-01-02T21:00:00", 0.1), decision("2024-01-03T21:00:00", 0.2))
    assert len(reader.read().decisions) == 2
    replacement = tmp_path / "new.jsonl"
    append_lines(replacement, decision("2024-02-01T21:00:00", 0.9))
    os.replace(replacement, path)  # log rotation: another file at the same path
    assert list(reader.read().decisions["target_position"]) == [0.9]
    path.write_text("")  # truncated in place
    assert reader.read().decisions.empty


def test_the_served_models_lines_are_read_as_they_are_written(tmp_path):
    """``serving.decider``'s decided line (signal block with an unsigned size) and its refusal line,
    written by the served model's own log writer."""
    from trading_rl.serving.decision_log import DecisionLog

    path = tmp_path / "nested" / "decisions.jsonl"
    log = DecisionLog(path)
    served = {
        "status": "decided",
        "timestamp": "2018-09-04T00:00:00",
        "symbol": "sp500",
        "target_position": 1.5,
        "signal": {"action": "SELL", "units": 2.5, "order_type": "market_on_open"},
        "raw_action": -0.4,
        "smoothed_action": -0.4,
        "confidence": 0.4,
        "safeguard": {"verdict": "passed", "rule": None, "reason": None},
        "model_version": 3,
    }
    log.write(served)
    log.write({"logged_at": "2026-12-06T00:00:00", "status": "refused", "field": "bars.close", "reason": "NaN"})
    read = read_decisions(path)
    assert read.count == 1 and read.skipped == 0 and read.problems == []
    row = read.decisions.iloc[0]
    assert (row["kind"], row["units"], row["safeguard_verdict"], row["model_version"]) == ("sell", -2.5, "passed", "3")
    assert row["action_raw"] == -0.4
