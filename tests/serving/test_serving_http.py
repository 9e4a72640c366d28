"""Bad requests through MLflow's own scoring server (``scoring_server.init`` on the served model,
over real HTTP in this process): each kind gets HTTP 400 with a message and a ``field`` naming what
is wrong, and leaves no trace but one ``refused`` line in the decision log (no state change, no
file, no log record)."""

from __future__ import annotations

import copy
import json
import logging
import math

import pandas as pd
import pytest
from helpers.served_model import Server, request_for

from trading_rl.serving.request import BAR_FIELDS


def _set(path: str, value):
    """A change that sets the dotted ``path`` of a request to ``value`` (``bars.close.3``: one bar)."""

    def change(request):
        *parents, last = path.split(".")
        target = request
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        if last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value
        return request

    return change


def _drop(path: str):
    def change(request):
        *parents, last = path.split(".")
        target = request
        for key in parents:
            target = target[key]
        del target[last]
        return request

    return change


def _bars(change):
    """A change of the bars' columns: ``change(columns) -> columns``."""

    def apply(request):
        request["bars"] = change(request["bars"])
        return request

    return apply


def _swap_rows(columns, a: int, b: int):
    for values in columns.values():
        values[a], values[b] = values[b], values[a]
    return columns


def _hourly(columns):
    start = pd.Timestamp(columns["timestamp"][0])
    columns["timestamp"] = [(start + pd.Timedelta(hours=i)).isoformat() for i in range(len(columns["timestamp"]))]
    return columns


def _first_bars(n: int):
    return _bars(lambda columns: {name: values[:n] for name, values in columns.items()})


# (kind, change of a good request, the field the refusal names, a fragment of its message). A change
# returning a list is the whole ``inputs`` list. The server decided the good request's latest bar
# before these: "older bar" sends the bars up to the one before it.
BAD_REQUESTS = [
    ("body over the size limit", _set("padding", "x" * 1_000_001), "body", "over the limit of 1000000"),
    ("unknown request key", _set("sybmol", "sp500"), "sybmol", "unknown key"),
    ("missing symbol", _drop("symbol"), "symbol", "missing"),
    ("wrong symbol", _set("symbol", "nasdaq"), "symbol", "the model trades 'sp500', got 'nasdaq'"),
    ("bars not an object", _set("bars", [[1.0, 2.0]]), "bars", "must be a JSON object"),
    ("missing bar column", _drop("bars.volume"), "bars.volume", "missing"),
    ("unknown bar column", _set("bars.adj_close", [1.0]), "bars.adj_close", "unknown key"),
    (
        "columns of unequal length",
        _bars(lambda c: {**c, "open": c["open"][1:]}),
        "bars.open",
        "values, bars.timestamp has",
    ),
    ("too few bars", _first_bars(63), "bars", "too few bars: 63 given, the model needs at least 64"),
    ("null price", _set("bars.close.70", None), "bars.close", "row 70 (2016-11-21T00:00:00) is None, not a number"),
    ("NaN price", _set("bars.close.70", math.nan), "bars.close", "NaN/inf"),
    ("infinite volume", _set("bars.volume.3", math.inf), "bars.volume", "NaN/inf"),
    ("price as text", _set("bars.open.5", "2100.5"), "bars.open", "is '2100.5', not a number"),
    ("non-positive price", _set("bars.low.8", 0.0), "bars.low", "prices must be > 0"),
    ("negative volume", _set("bars.volume.9", -1.0), "bars.volume", "volume must be >= 0"),
    ("high below the close", _set("bars.high.10", 1.0), "bars.high", "below max(open, close)"),
    (
        "unparseable timestamp",
        _set("bars.timestamp.4", "yesterday"),
        "bars.timestamp",
        "row 4 is 'yesterday', not an ISO 8601",
    ),
    ("timestamp not a string", _set("bars.timestamp.4", 1_500_000_000), "bars.timestamp", "not an ISO 8601 string"),
    ("unsorted timestamps", _bars(lambda c: _swap_rows(c, 20, 21)), "bars.timestamp", "not in time order: row 21"),
    (
        "duplicate timestamp",
        _bars(lambda c: {**c, "timestamp": c["timestamp"][:31] + c["timestamp"][30:-1]}),
        "bars.timestamp",
        "duplicate timestamp",
    ),
    ("wrong bar frequency", _bars(_hourly), "bars.timestamp", "wrong bar frequency"),
    (
        "timestamps with a UTC offset",
        _bars(lambda c: {**c, "timestamp": [t + "+00:00" for t in c["timestamp"]]}),
        "bars.timestamp",
        "carry a UTC offset",
    ),
    (
        "bar older than the last one seen",
        _first_bars(-1),
        "bars.timestamp",
        "is older than the latest bar already decided",
    ),
    ("portfolio not an object", _set("portfolio", 100000.0), "portfolio", "must be a JSON object"),
    (
        "unknown portfolio key",
        _set("portfolio.units", 3.0),
        "portfolio.units",
        "unknown key; known: ['cash', 'position'",
    ),
    ("missing cash", _drop("portfolio.cash"), "portfolio.cash", "missing"),
    ("non-finite cash", _set("portfolio.cash", math.inf), "portfolio.cash", "must be a finite number"),
    (
        "open position without entry price",
        _set("portfolio.position", 5.0),
        "portfolio.entry_price",
        "must be > 0 while a position is open",
    ),
    (
        "short position for a long-only model",
        lambda r: _set("portfolio.entry_price", 2500.0)(_set("portfolio.position", -5.0)(r)),
        "portfolio.position",
        "long only",
    ),
    (
        "fractional time in position",
        _set("portfolio.time_in_position", 1.5),
        "portfolio.time_in_position",
        "integer >= 0",
    ),
    ("last action out of range", _set("portfolio.last_action", 1.5), "portfolio.last_action", "in [-1, 1]"),
    ("non-positive reference price", _set("reference_price", -1.0), "reference_price", "finite number > 0"),
    ("two requests in one call", lambda r: [r, r], "inputs", "one request per call, got 2"),
]


@pytest.fixture(scope="module")
def decided(served_model_dir, serving_setup, tmp_path_factory):
    """A server that decided one good request (the full history up to the last bar)."""
    started = Server(served_model_dir, tmp_path_factory.mktemp("bad_requests") / "decisions.jsonl")
    good = request_for(serving_setup.prices)
    status, body = started.post({"inputs": [good]})
    assert status == 200, body
    yield started, good
    started.close()


def _state(decider) -> tuple:
    return decider.last_bar, copy.deepcopy(vars(decider.safeguards)), decider._decisions


def test_the_list_names_twenty_kinds_or_more():
    assert len(BAD_REQUESTS) >= 20 and len({kind for kind, *_ in BAD_REQUESTS}) == len(BAD_REQUESTS)


@pytest.mark.parametrize(("kind", "change", "field", "fragment"), BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS])
def test_a_bad_request_gets_400_naming_the_field_and_leaves_only_a_log_line(
    decided, caplog, kind, change, field, fragment
):
    server, good = decided
    folder = server.decision_log.parent
    files = sorted(folder.rglob("*"))
    lines = server.decision_log.read_text().splitlines()
    state = _state(server.decider)
    changed = change(copy.deepcopy(good))
    with caplog.at_level(logging.DEBUG, logger="trading_rl"):
        status, body = server.post({"inputs": changed if isinstance(changed, list) else [changed]})
    assert status == 400, body
    assert body["error_code"] == "INVALID_PARAMETER_VALUE" and body["field"] == field
    assert body["message"].startswith(f"{field}: ") and fragment in body["message"], body["message"]
    assert len(body["message"]) < 400  # the request is not echoed back
    # No trace but one decision-log line: the state, the files and the log are as they were.
    assert _state(server.decider) == state
    assert sorted(folder.rglob("*")) == files
    assert [record for record in caplog.records if record.name.startswith("trading_rl")] == []
    new = server.decision_log.read_text().splitlines()
    assert new[: len(lines)] == lines and len(new) == len(lines) + 1
    entry = json.loads(new[-1])
    assert (entry["status"], entry["field"]) == ("refused", field) and fragment in entry["reason"]
    assert set(entry) == {"logged_at", "status", "field", "reason", "model_version"}


def test_a_request_as_one_object_instead_of_a_list_is_refused_by_mlflow(decided):
    server, good = decided
    status, body = server.post({"inputs": good})
    assert status == 400 and "Expected list, but got dict" in body["message"]


def test_a_body_that_is_not_json_is_refused_by_mlflow(decided):
    server, _ = decided
    status, body = server.post(None, raw=b"{not json")
    assert status == 400 and body["error_code"] == "BAD_REQUEST"


def test_every_bar_field_is_required(decided):
    server, good = decided
    for name in BAR_FIELDS:
        status, body = server.post({"inputs": [_drop(f"bars.{name}")(copy.deepcopy(good))]})
        assert (status, body["field"]) == (400, f"bars.{name}")


def test_a_huge_value_is_quoted_cut_short(decided):
    server, good = decided
    status, body = server.post({"inputs": [{**good, "symbol": "x" * 100_000}]})
    assert (status, body["field"]) == (400, "symbol") and body["message"].endswith("...") and len(body["message"]) < 200
    status, body = server.post({"inputs": [{**good, "k" * 10_000: 1}]})
    assert status == 400 and len(body["field"]) == 80
