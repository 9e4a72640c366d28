"""The served model in tests: requests built from a price frame, and MLflow's own scoring server app
(``scoring_server.init``) on a loaded served model behind uvicorn on a free port in this process."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
import urllib.error
import urllib.request
from unittest.mock import patch

import pandas as pd

from trading_rl.export.inference import BAR_COLUMNS, PortfolioState
from trading_rl.serving import ALERTS_FILE_ENV, DECISION_LOG_ENV


def request_for(
    bars: pd.DataFrame,
    portfolio: dict | None = None,
    reference_price: float | None = None,
    symbol: str = "sp500",
) -> dict:
    """One request: every bar of ``bars`` (oldest first) and ``portfolio`` (a flat account of 100,000
    by default)."""
    columns: dict[str, list] = {"timestamp": [stamp.isoformat() for stamp in bars.index]}
    columns.update({name: bars[name].astype(float).tolist() for name in BAR_COLUMNS})
    request = {"symbol": symbol, "bars": columns, "portfolio": portfolio or {"cash": 100_000.0}}
    if reference_price is not None:
        request["reference_price"] = reference_price
    return request


BUYER = {"cash": 100_000.0, "last_action": 0.9}  # a flat account whose last decision was a strong buy


def buying_bars(setup, decider) -> pd.DataFrame:
    """The longest history of ``setup.prices`` whose last bar the policy buys on from ``BUYER``'s
    account."""
    prices = setup.prices
    for end in range(len(prices), 100, -1):
        if decider.engine.signal(prices.iloc[:end], PortfolioState(**BUYER)).units > 0.0:
            return prices.iloc[:end]
    raise AssertionError("the policy never buys")


class Server:
    """MLflow's scoring server app (``scoring_server.init``) for one loaded model, served by uvicorn
    on a free port in a thread of this process; its alerts file ``alerts.jsonl`` beside the decision
    log."""

    def __init__(self, model_dir, decision_log):
        import mlflow.pyfunc
        import uvicorn
        from mlflow.pyfunc import scoring_server

        self.alerts_file = decision_log.with_name("alerts.jsonl")
        # patch.dict restores the whole environment after: the two paths, and the serving mark that
        # scoring_server.init sets in this process.
        paths = {DECISION_LOG_ENV: str(decision_log), ALERTS_FILE_ENV: str(self.alerts_file)}
        with patch.dict(os.environ, paths):
            self.model = mlflow.pyfunc.load_model(str(model_dir))
            app = scoring_server.init(self.model)
        self.decision_log = decision_log
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the scoring server did not start in 30 s")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self._server.servers[0].sockets[0].getsockname()[1]}/invocations"

    @property
    def decider(self):
        return self.model.unwrap_python_model().decider

    def post(self, body, raw: bytes | None = None) -> tuple[int, dict]:
        data = raw if raw is not None else json.dumps(body).encode()
        request = urllib.request.Request(self.url, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def next_portfolio_state(state: PortfolioState, info: dict) -> PortfolioState:
    """The account after an env step, from the env's info; the average entry price and the time in
    position are recomputed from the fills (the env does not report them)."""
    units_before, units = state.position, info["position"]
    entry = state.entry_price
    if units == 0.0:
        entry = 0.0
    elif info["trade_units"] > 0.0:
        entry = (units_before * entry + info["trade_units"] * info["fill_price"]) / units
    if units == 0.0:
        time_in_position = 0
    elif units * units_before > 0.0:
        time_in_position = state.time_in_position + 1
    else:
        time_in_position = 1
    return PortfolioState(info["cash"], units, entry, time_in_position, info["action_smoothed"])


def next_portfolio(state: dict, info: dict) -> dict:
    """:func:`next_portfolio_state` on a request's ``portfolio`` mapping."""
    return dataclasses.asdict(next_portfolio_state(PortfolioState(**state), info))
