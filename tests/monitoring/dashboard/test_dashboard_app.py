"""The Streamlit script under Streamlit's own ``AppTest``: every panel renders with a full set of
sources, with an empty record, with nothing written yet, and with each file corrupt (the panel
says what is wrong with which file; the page never raises); a decision appended between two runs
is on the second."""

import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.dashboard_sources import GATES, VERSION, append_lines, decision, forward_record, write_sources
from helpers.synthetic_prices import random_walk_prices
from streamlit.testing.v1 import AppTest

from trading_rl.monitoring.dashboard import app
from trading_rl.monitoring.dashboard.sources import DashboardSources

APP = Path(app.__file__)
PANELS = ["Deployed model", "Served model decisions", "Active alerts", "Forward record", "Drift per feature"]
FIGURES = 6  # equity, drawdown, rolling Sharpe, position, actions, drift


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> DashboardSources:
    """Every source once (the MLflow registry costs seconds); tests change copies of it."""
    return write_sources(tmp_path_factory.mktemp("dashboard") / "sources")


def copy_of(sources: DashboardSources, target: Path) -> DashboardSources:
    root = sources.record.parent
    shutil.copytree(root, target)
    moved = {
        name: target / getattr(sources, name).name for name in ("record", "report", "drift", "decisions", "alerts")
    }
    return replace(
        sources, **moved, prices=target / sources.prices.name, tracking_uri=f"sqlite:///{target / 'mlflow.db'}"
    )


def run(sources: DashboardSources, monkeypatch, argv: list[str] | None = None) -> AppTest:
    monkeypatch.setattr(sys, "argv", [str(APP), *(sources.to_argv() if argv is None else argv)])
    page = AppTest.from_file(str(APP), default_timeout=120).run()
    assert not page.exception, [exception.value for exception in page.exception]
    assert [header.value for header in page.subheader] == PANELS
    return page


def texts(elements) -> list[str]:
    return [element.value for element in elements]


def test_every_panel_renders_with_a_record(written, monkeypatch):
    page = run(written, monkeypatch)
    assert texts(page.error) == [] and texts(page.warning) == [] and texts(page.info) == []
    assert len(page.get("plotly_chart")) == FIGURES
    champion, decisions, active, recent, trades = page.table
    assert champion.value.to_dict("list") == {"gate": list(GATES), "verdict": list(GATES.values())}
    assert "trading_rl_sac_icm@champion → version 1" in page.markdown[0].value
    assert "**Latest decision** 2013-03-04T21:00:00+00:00" in page.markdown[1].value
    assert list(decisions.value["target_position"]) == [0.0, 0.3]
    assert list(zip(active.value["rule"], active.value["level"])) == [("drift", "critical"), ("drawdown", "info")]
    assert len(recent.value) == 3 and (trades.value["trade_value"] != 0).all()
    metrics = {metric.label: metric.value for metric in page.metric}
    assert metrics["forward bars"] == "80" and metrics["last bar"].startswith("2013-")
    assert any("record version " + VERSION in caption.value for caption in page.caption)


def test_an_empty_record_is_said_and_the_other_panels_still_render(written, tmp_path, monkeypatch):
    sources = copy_of(written, tmp_path / "copy")
    shutil.rmtree(sources.record)
    empty = forward_record(random_walk_prices(300, seed=5)).iloc[:0]
    empty.to_parquet(sources.record.parent / "empty.parquet")
    page = run(replace(sources, record=sources.record.parent / "empty.parquet"), monkeypatch)
    assert texts(page.error) == []
    assert any(
        "is empty: no bar after the deployed model's data end has been scored yet" in i for i in texts(page.info)
    )
    assert len(page.get("plotly_chart")) == 1  # the drift report's figure only
    assert len(page.table) == 4 and page.metric.len == 0


def test_a_project_with_nothing_written_yet_says_so_in_every_panel(tmp_path, monkeypatch):
    sources = DashboardSources(
        record=tmp_path / "forward_record.parquet",
        report=tmp_path / "forward_report.json",
        drift=tmp_path / "forward_drift.json",
        decisions=tmp_path / "decisions.jsonl",
        alerts=tmp_path / "alerts.jsonl",
        prices=tmp_path / "prices",
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
    )
    page = run(sources, monkeypatch)
    assert texts(page.error) == [] and len(page.get("plotly_chart")) == 0
    infos = texts(page.info)
    assert [info.split(" ")[:3] for info in infos] == [
        ["no", "MLflow", "store"],
        ["no", "decision", "log"],
        ["no", "forward", "record"],
        ["no", "forward", "drift"],
    ]
    assert texts(page.success) == [f"no alert in {sources.alerts}"]
    assert not (tmp_path / "mlflow.db").exists()


def test_each_corrupt_file_is_named_in_its_panel_and_the_page_still_renders(written, tmp_path, monkeypatch):
    sources = copy_of(written, tmp_path / "copy")
    record_file = sources.record / VERSION / sources.record.name
    record_file.write_bytes(b"PAR1 cut off in the middle of a write")
    (sources.drift / VERSION / sources.drift.name).write_text('{"features": [')
    with open(sources.alerts, "a") as file:
        file.write("not an alert\n")
    with open(sources.decisions, "a") as file:
        file.write('{"timestamp": "2013-03-05T21:00:00", "symbol": "AAA", "target_position": "all in"}\n')
    page = run(sources, monkeypatch)
    errors = texts(page.error)
    assert len(errors) == 3
    assert f"the forward record {record_file} is not a readable parquet file" in errors[1]
    assert f"{sources.alerts}: line 4 is not an alert in JSON" in errors[0]
    assert f"the forward drift report {sources.drift / VERSION / sources.drift.name} is not readable JSON" in errors[2]
    assert texts(page.warning) == [
        f"{sources.decisions}: line 3: field 'target_position' must be a finite number, got 'all in'; "
        "the line is left out"
    ]
    assert "2 decision(s) in the log" in page.markdown[1].value  # the valid lines are still shown
    assert page.table[0].value["gate"].tolist() == list(GATES)  # the registry panel is untouched


def test_a_corrupt_mlflow_store_is_named_in_its_panel(written, tmp_path, monkeypatch):
    sources = copy_of(written, tmp_path / "copy")
    Path(sources.tracking_uri.removeprefix("sqlite:///")).write_bytes(b"not a database" * 100)
    page = run(sources, monkeypatch)
    assert f"the MLflow registry at {sources.tracking_uri} is not readable" in texts(page.error)[0]
    assert len(page.get("plotly_chart")) == FIGURES


def test_a_decision_appended_between_two_runs_is_on_the_second(written, tmp_path, monkeypatch):
    sources = copy_of(written, tmp_path / "copy")
    page = run(sources, monkeypatch)
    append_lines(sources.decisions, decision("2013-03-05T21:00:00+00:00", 0.6, model_version="4"))
    page.run()
    assert "**Latest decision** 2013-03-05T21:00:00+00:00" in page.markdown[1].value
    assert "model 4 · 3 decision(s) in the log" in page.markdown[1].value


def test_bad_arguments_are_named_on_the_page(monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(APP), "--refresh-s", "0"])
    page = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not page.exception
    assert texts(page.error) == ["dashboard option 'refresh_s' must be > 0 seconds, got 0.0"]
