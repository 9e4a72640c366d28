"""The forward rerun sends its checks as alerts through the configured channels: a planted drawdown
gives exactly one critical alert across reruns inside the cooldown, and ``forward_alerts`` is the
same with or without alerting."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd

from trading_rl.monitoring.alerting import AlertingParams
from trading_rl.phases.forward import ForwardData, ForwardParams, NotDeployed, check_forward_decay
from trading_rl.pipelines.forward.pipeline import create_pipeline

FOLDS = pd.DataFrame(
    {
        "symbol": "X",
        "kind": "agent",
        "agent": "sac_icm",
        "sharpe": [0.2, 0.8, 1.5],
        "max_drawdown": [-0.05, -0.08, -0.12],
        "fill_rate": [0.1, 0.2, 0.3],
    }
)
CALM_DRIFT = {"drifted_features": [], "actions": {"psi": 0.01, "drifted": False}}


def _record(n_down: int) -> pd.DataFrame:
    """40 bars up 1% each, then ``n_down`` bars down 1.3% each (a 23% drawdown after 20), with
    varied decisions: no collapse, no single-bar loss near a threshold."""
    returns = np.r_[np.full(40, 0.01), np.full(n_down, -0.013)]
    return pd.DataFrame(
        {
            "timestamp": pd.bdate_range("2026-01-01", periods=len(returns)),
            "return": returns,
            "equity": 10_000 * np.cumprod(1 + returns),
            "action_raw": np.random.default_rng(0).uniform(-1, 1, len(returns)),
        }
    )


def _report(record: pd.DataFrame) -> dict:
    return {
        "status": "tracked",
        "model_version": "m1",
        "symbol": "X",
        "n_bars": len(record),
        "new_bars": 2,
        "last_bar": record["timestamp"].iloc[-1].isoformat(),
        "periods_per_year": 252.0,
        # the record's own drawdown (deeper than any walk-forward window's), a Sharpe within their range
        "metrics": {"sharpe": 0.9, "max_drawdown": float((record["equity"] / record["equity"].cummax() - 1).min())},
        "fill_rate": 0.2,
        "collapse": {"collapsed": False},
    }


# check_forward_decay reads only the deployed env's hold threshold from the forward data
DEPLOYED = ForwardData(
    deployment=None,  # type: ignore[arg-type]
    spec=SimpleNamespace(env_config=lambda: SimpleNamespace(hold_threshold=0.1)),  # type: ignore[arg-type]
    features=pd.DataFrame(),
)


def _rerun(n_down: int, alerting: AlertingParams | None) -> dict:
    record = _record(n_down)
    alerts, _ = check_forward_decay(_report(record), record, CALM_DRIFT, FOLDS, ForwardParams(), DEPLOYED, alerting)
    return alerts


def test_a_planted_drawdown_is_one_critical_alert_inside_the_cooldown(tmp_path):
    path = tmp_path / "alerts" / "alerts.jsonl"
    alerting = AlertingParams.from_mapping({"channels": {"jsonl": str(path)}, "cooldown": {"bars": 5}}, "alerting")
    first = _rerun(20, alerting)
    written = path.read_bytes()
    second = _rerun(22, alerting)  # the next rerun, two bars later: inside the cooldown, nothing new
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    critical = [line for line in lines if line["level"] == "critical"]
    assert path.read_bytes() == written and len(critical) == 1
    assert critical[0]["rule"] == "drawdown" and critical[0]["bar"] == 60
    assert critical[0]["value"] > 0.2 and critical[0]["context"]["model_version"] == "m1"
    assert critical[0]["timestamp"] == _record(20)["timestamp"].iloc[-1].isoformat()
    # the forward decay checks' own drawdown alert goes out as the (warning) decay alert
    assert [(line["rule"], line["context"]["checks"]) for line in lines if line["level"] == "warning"] == [
        ("decay", ["drawdown"])
    ]
    assert first["alerts"] == second["alerts"] == ["drawdown"]
    # after the cooldown it is sent again
    _rerun(25, alerting)
    assert [line["bar"] for line in map(json.loads, path.read_text().splitlines()) if line["level"] == "critical"] == [
        60,
        65,
    ]


def test_forward_alerts_are_the_same_with_alerting(tmp_path):
    alerting = AlertingParams.from_mapping({"channels": {"jsonl": str(tmp_path / "a.jsonl")}}, "alerting")
    assert _rerun(20, alerting) == _rerun(20, None)


def test_nothing_is_sent_when_nothing_is_deployed_or_checked(tmp_path):
    path = tmp_path / "alerts.jsonl"
    alerting = AlertingParams.from_mapping({"channels": {"jsonl": str(path)}}, "alerting")
    record = _record(20)
    not_checked = {"status": "not checked", "reason": "no version carries alias @champion"}
    check_forward_decay(not_checked, record, CALM_DRIFT, FOLDS, ForwardParams(), NotDeployed("nothing"), alerting)
    check_forward_decay(_report(record), record, CALM_DRIFT, FOLDS, ForwardParams(), NotDeployed("x"), alerting)
    assert not path.exists()


def test_the_forward_node_takes_the_alerting_section_and_keeps_its_name():
    (node,) = [node for node in create_pipeline().nodes if node.name == "check_forward_decay"]
    assert node.inputs[-2:] == ["forward_data", "params:alerting"]
    assert node.outputs == ["forward_alerts", "forward_metrics"]
