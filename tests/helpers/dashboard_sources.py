"""Every source of the monitoring dashboard, written where a forward rerun, the served model and the
promote pipeline write them: a versioned forward record, report and drift report, a price file, an
alerts file, a decision log and an MLflow store whose ``trading_rl_sac_icm@champion`` carries gates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.mlflow_store import empty_store
from helpers.synthetic_prices import random_walk_prices
from trading_rl.monitoring.alerting import Alert, JsonLinesChannel, Level
from trading_rl.monitoring.dashboard.sources import DashboardSources

VERSION = "2026-12-01T10.00.00.000Z"
SYMBOL = "AAA"
MODEL = "trading_rl_sac_icm"
GATES = {"collapse": "not collapsed", "final_evaluation": "passed"}


def forward_record(prices: pd.DataFrame, n_bars: int = 80, seed: int = 0) -> pd.DataFrame:
    """A record of the last ``n_bars`` of ``prices``: a position between 0 and 100 units changed on
    about one bar in four, equity marked to the close, fees on each trade."""
    rng = np.random.default_rng(seed)
    bars = prices.iloc[-n_bars:]
    close = bars["close"].to_numpy()
    trades = np.where(rng.random(n_bars) < 0.25, rng.integers(-20, 21, n_bars), 0).astype(np.float64)
    position = np.clip(np.cumsum(trades) + 50.0, 0.0, 100.0)
    trade_units = np.diff(np.r_[50.0, position])
    fees = np.abs(trade_units) * close * 2e-4
    cash = 100_000.0 - 50.0 * float(prices["close"].iloc[-n_bars - 1]) - np.cumsum(trade_units * close + fees)
    equity = cash + position * close
    start = 100_000.0
    actions = np.clip(trade_units / 20.0, -1.0, 1.0)
    return pd.DataFrame(
        {
            "timestamp": bars.index.to_numpy(),
            "return": np.diff(np.r_[start, equity]) / np.r_[start, equity[:-1]],
            "equity": equity,
            "cash": cash,
            "position": position,
            "trade_value": trade_units * close,
            "fees": fees,
            "action_raw": actions,
            "action_smoothed": actions,
            "model_version": "3",
            "scored_in": VERSION,
        }
    )


def write_versioned(path: Path, write) -> Path:
    """``write(file)`` into Kedro's layout of one version, ``<path>/<VERSION>/<name>``."""
    file = path / VERSION / path.name
    file.parent.mkdir(parents=True, exist_ok=True)
    write(file)
    return file


def decision(timestamp: str, target: float, **fields) -> dict:
    return {
        "timestamp": timestamp,
        "symbol": SYMBOL,
        "target_position": target,
        "kind": "buy" if target > 0 else "hold",
        "units": 10.0 if target > 0 else 0.0,
        "action_raw": target,
        "action_smoothed": target,
        "safeguard_verdict": "passed",
        "safeguard_rule": None,
        "confidence": 0.8,
        "model_version": "3",
        **fields,
    }


def append_lines(path: Path, *objects: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        file.write("".join(json.dumps(item) + "\n" for item in objects))


def register_champion(tracking_uri: str, gates: dict[str, str] = GATES, version_tags: dict | None = None) -> None:
    """A version of ``MODEL`` tagged with ``gates`` as ``gate.<name>`` (as registration does) and
    pointed at by ``@champion`` with promotion tags (as the promote pipeline does)."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    client.create_registered_model(MODEL)
    tags = {f"gate.{name}": verdict for name, verdict in gates.items()} | {"save_version": VERSION}
    model_folder = Path(tracking_uri.removeprefix("sqlite:///")).parent / "model"
    version = client.create_model_version(MODEL, source=str(model_folder), tags=tags | (version_tags or {}))
    client.set_registered_model_alias(MODEL, "champion", version.version)
    for key, value in {"promoted_by": "lead", "promoted_at": VERSION}.items():
        client.set_model_version_tag(MODEL, version.version, key, value)


def write_sources(root: Path, *, record: bool = True, registry: bool = True) -> DashboardSources:
    """Every source under ``root`` (the record and the registry optional) and the sources naming them."""
    prices = random_walk_prices(300, seed=5)
    price_folder = root / "prices"
    price_folder.mkdir(parents=True)
    prices.to_csv(price_folder / f"{SYMBOL}.csv")
    sources = DashboardSources(
        record=root / "forward_record.parquet",
        report=root / "forward_report.json",
        drift=root / "forward_drift.json",
        decisions=root / "decisions.jsonl",
        alerts=root / "alerts.jsonl",
        prices=price_folder,
        tracking_uri=f"sqlite:///{root / 'mlflow.db'}",
        refresh_s=0.5,
    )
    if record:
        frame = forward_record(prices)
        write_versioned(sources.record, lambda file: frame.to_parquet(file))
        report = {"status": "tracked", "symbol": SYMBOL, "periods_per_year": 252.0, "model_version": "3"}
        write_versioned(sources.report, lambda file: file.write_text(json.dumps(report)))
        drift = {
            "window": {"first_bar": "2013-01-01", "last_bar": "2013-03-01", "n_bars": 63, "reference": "training"},
            "features": [
                {"feature": name, "psi": psi, "ks_statistic": ks, "ks_pvalue": p, "drifted": psi > 0.25 and p < 0.01}
                for name, psi, ks, p in [
                    ("log_return", 0.05, 0.1, 0.4),
                    ("volatility", 0.6, 0.4, 1e-4),
                    ("rsi", 0.12, 0.15, 0.08),
                    ("garch_vol", 0.31, 0.3, 0.002),
                    ("volume_z", 0.02, 0.05, 0.9),
                    ("macd", 0.2, 0.2, 0.03),
                ]
            ],
            "drifted_features": ["volatility", "garch_vol"],
            "actions": {"psi": 0.12, "psi_max": 0.25, "drifted": False},
        }
        write_versioned(sources.drift, lambda file: file.write_text(json.dumps(drift)))
    channel = JsonLinesChannel(sources.alerts)
    channel.send(Alert("drawdown", Level.WARNING, "drawdown 12% from the peak", 0.12, 0.10, "2013-02-01T00:00:00"))
    channel.send(Alert("drift", Level.CRITICAL, "3 features drifted", 3.0, 3.0, "2013-02-04T00:00:00"))
    channel.send(Alert("drawdown", Level.INFO, "drawdown 5% from the peak", 0.05, 0.05, "2013-02-05T00:00:00"))
    append_lines(
        sources.decisions,
        decision("2013-03-01T21:00:00+00:00", 0.3),
        decision("2013-03-04T21:00:00+00:00", 0.0, safeguard_verdict="blocked", safeguard_rule="max_daily_loss"),
    )
    if registry:
        register_champion(empty_store(root / "mlflow.db"))
    return sources
