"""End to end, the way docs/serve.md runs it: a ci run trains, gates, exports and registers the
served model; ``promote`` makes it the champion; the ci symbol's newest bars arrive and the
scheduled ``forward`` rerun records them; ``mlflow models serve`` on the champion is sent those bars
one request at a time as a client would send them, then bars planted to draw the account down.

The ci run is the suite's one default ``kedro run --env ci`` (the ``ci_default_run`` fixture, which
the MLflow-run test reads too), its sp500 read from a file without its newest ``NEW_BARS`` bars;
promote and forward run on a copy of its project. One test: the ci run is its cost
(docs/benchmarks.md)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.ci_default_run import HELD_BACK_BARS, SYMBOL

from trading_rl.data import load_prices
from trading_rl.export.inference import BAR_COLUMNS
from trading_rl.monitoring.dashboard.decisions import DecisionLogReader
from trading_rl.monitoring.dashboard.sources import DashboardSources, read_alerts
from trading_rl.serving import ALERT_WEBHOOK_ENV, ALERTS_FILE_ENV, DECISION_LOG_ENV

NEW_BARS = HELD_BACK_BARS  # the ci symbol's newest bars: not trained on, recorded by forward, posted one by one
PLANTED_BARS = 7  # bars that fall PLANTED_FALL each from the last real close, a long position held
PLANTED_FALL = 0.04  # 4 % a bar: below daily_loss's critical 5 %; the drawdown is critical from bar 6
ONLY_SP500_FROM_A_FILE = {"feature_extraction": {"symbols": [{"name": SYMBOL, "source": "file"}]}}
SERVE_START_S = 60


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _newest(project: Path, dataset: str) -> Path:
    return sorted((project / dataset).glob(f"*/{Path(dataset).name}"))[-1]


def _request(bars: pd.DataFrame, portfolio: dict, reference_price: float | None) -> dict:
    columns: dict[str, list] = {"timestamp": [stamp.isoformat() for stamp in bars.index]}
    columns.update({name: bars[name].astype(float).tolist() for name in BAR_COLUMNS})
    request = {"symbol": SYMBOL, "bars": columns, "portfolio": portfolio}
    if reference_price is not None:
        request["reference_price"] = reference_price
    return {"inputs": [request]}


def _post(url: str, body: dict) -> dict:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        (prediction,) = json.loads(response.read())["predictions"]
        return prediction


def _planted(last: pd.Series, after: pd.Timestamp) -> pd.DataFrame:
    """``PLANTED_BARS`` business days after ``after``, each closing ``PLANTED_FALL`` below the one
    before, from ``last`` (the newest real bar)."""
    closes = float(last["close"]) * (1.0 - PLANTED_FALL) ** np.arange(1, PLANTED_BARS + 1)
    opens = np.r_[float(last["close"]), closes[:-1]]
    return pd.DataFrame(
        {
            "open": opens,
            "high": np.maximum(opens, closes) * 1.002,
            "low": np.minimum(opens, closes) * 0.998,
            "close": closes,
            "volume": float(last["volume"]),
        },
        index=pd.bdate_range(after + pd.offsets.BDay(1), periods=PLANTED_BARS, name="timestamp"),
    )


def _account_after(state: dict, row, response: dict) -> dict:
    """The client's account after a recorded bar: cash and position as the record has them (the
    broker's truth), the entry price and time in position from the fill, and the response's
    smoothed action passed back."""
    units_before, units = state.get("position", 0.0), float(row.position)
    traded = units - units_before
    entry = state.get("entry_price", 0.0)
    if units == 0.0:
        entry = 0.0
    elif traded * units > 0.0:
        entry = (units_before * entry + float(row.trade_value)) / units
    held = state.get("time_in_position", 0)
    held = 0 if units == 0.0 else held + 1 if units * units_before > 0.0 else 1
    return {
        "cash": float(row.cash),
        "position": units,
        "entry_price": entry,
        "time_in_position": held,
        "last_action": response["smoothed_action"],
    }


@pytest.fixture
def served_champion(tmp_path, ci_default_run, kedro_run):
    """Promote and forward on a copy of the ci run's project, and ``mlflow models serve`` on the
    champion started from the project root (its decision log and alerts file at their defaults there)."""
    project = Path(shutil.copytree(ci_default_run.project, tmp_path / "project"))
    prices = load_prices(SYMBOL)
    kedro_run(project, ["promote"], runtime_params=ONLY_SP500_FROM_A_FILE)
    prices.to_csv(project / f"data/01_raw/prices/{SYMBOL}.csv")  # the newest bars arrive
    kedro_run(project, ["forward"], runtime_params=ONLY_SP500_FROM_A_FILE)

    port, output = _free_port(), tmp_path / "serve.log"
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in (DECISION_LOG_ENV, ALERTS_FILE_ENV, ALERT_WEBHOOK_ENV)
    }
    environment["MLFLOW_TRACKING_URI"] = "sqlite:///data/ci/mlflow.db"  # docs/serve.md's ci store
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    command = [sys.executable, "-m", "mlflow", "models", "serve", "-m", "models:/trading_rl_sac_icm@champion"]
    with open(output, "wb") as sink:
        server = subprocess.Popen(
            [*command, "--env-manager", "local", "--port", str(port)],
            cwd=project,
            env=environment,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + SERVE_START_S
        while True:
            assert server.poll() is None, output.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=1):
                    break
            except (OSError, urllib.error.URLError):
                assert time.monotonic() < deadline, "no answer:\n" + output.read_text()[-3000:]
                time.sleep(0.25)
        yield project, prices, f"http://127.0.0.1:{port}/invocations"
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


@pytest.mark.slow
def test_the_champion_served_decides_the_new_bars_as_forward_recorded_and_alerts_once_on_a_drawdown(
    served_champion,
):
    project, prices, url = served_champion
    record = pd.read_parquet(_newest(project, "data/07_model_output/forward_record.parquet"))
    assert len(record) == NEW_BARS  # decided on the last trained bar .. the one before the newest
    sources = DashboardSources(  # the dashboard's own readers on the server's default files
        decisions=project / "data/08_reporting/serving/decisions.jsonl",
        alerts=project / "data/08_reporting/alerts/alerts.jsonl",
    )
    decisions = DecisionLogReader(sources.decisions)
    assert not decisions.read().exists

    # The new bars, one request each as a client sends them: every bar from the file's first, the
    # account as the broker holds it, the expected fill (the next open) as reference price.
    account: dict = {"cash": 100_000.0, "last_action": None}
    responses = []
    for row in record.itertuples():
        decided = prices.index[prices.index.get_loc(row.timestamp) - 1]  # the record's rows are the bars after
        response = _post(url, _request(prices.loc[:decided], account, float(prices.loc[row.timestamp, "open"])))
        assert response["timestamp"] == decided.isoformat() and response["model_version"] == row.model_version
        assert response["raw_action"] == pytest.approx(row.action_raw, abs=1e-5)  # ONNX vs the recorded policy
        assert response["smoothed_action"] == pytest.approx(row.action_smoothed, abs=1e-5)
        units = float(row.position) - account.get("position", 0.0)
        assert response["policy"]["units"] == pytest.approx(units, rel=1e-4, abs=1e-9)
        assert response["policy"]["kind"] == ("buy" if units > 0 else "sell" if units < 0 else "hold")
        read = decisions.read()  # the dashboard sees each decision as it is logged
        assert read.count == len(responses) + 1 and read.decisions["timestamp"].iloc[-1] == decided.isoformat()
        account = _account_after(account, row, response)
        responses.append(response)

    # The drawdown: the planted bars after the newest, an account holding the peak equity long.
    newest = prices.iloc[-1]
    peak = max(response["equity"] for response in responses)
    planted = _planted(newest, prices.index[-1])
    held = {"cash": 0.0, "position": peak / float(newest["close"]), "entry_price": float(newest["close"])}
    for k in range(PLANTED_BARS):
        bars = pd.concat([prices, planted.iloc[: k + 1]])
        _post(url, _request(bars, {**held, "time_in_position": k + 1, "last_action": 0.0}, None))
    logged = decisions.read()
    assert logged.count == len(record) + PLANTED_BARS
    deadline = time.monotonic() + 10
    while not [a for a in _served_alerts(sources) if a["level"] == "critical"] and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # the queue would have sent a second one by now
    critical = [alert for alert in _served_alerts(sources) if alert["level"] == "critical"]
    assert [alert["rule"] for alert in critical] == ["drawdown"], critical
    assert critical[0]["timestamp"] == planted.index[5].isoformat()  # 1 - 0.96**6 = 21.7 % >= 20 %
    # the 7th planted bar (23.4 % down) was judged critical too: inside the cooldown, not sent again
    lines = [json.loads(line) for line in sources.decisions.read_text().splitlines()]
    assert {"rule": "drawdown", "level": "critical"} in lines[-1]["alerts"]


def _served_alerts(sources: DashboardSources) -> list[dict]:
    """The served model's alerts in the alerts file the dashboard reads (the forward rerun's are
    there too, ``context.source: forward``)."""
    found = read_alerts(sources.alerts)
    assert isinstance(found, list), found
    assert any(alert["context"]["source"] == "forward" for alert in found)  # one file for both
    return [alert for alert in found if alert["context"]["source"] == "served"]
