"""What the served model is made of: the exported actor and one plain-data serving config.

``served_package`` builds it from the export pipeline's outputs (the ONNX actor and the
``<agent>_inference_config``: feature parameters, scaler, env config, feature columns, safeguards)
plus what a server checks requests against (the model's symbol, bar spacing, time zone and the
request size limit) and what every response names (the model version: the Kedro save version of
the trained agent, as the forward record names it; and the feature-parameter digest), and the
``alerting`` section its decisions are judged by (``serving.alerts``). The MLflow model
(``serving.pyfunc``) stores the two as artifacts and an example request as its input example.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.config import Section, setting, stored_section
from trading_rl.envs.continuous import EnvConfig
from trading_rl.envs.deployment import stored_sections
from trading_rl.export.inference import BAR_COLUMNS
from trading_rl.export.safeguards import SafeguardConfig
from trading_rl.features import max_lookback
from trading_rl.features.indicators import FeatureParams
from trading_rl.monitoring.alerting import AlertingParams
from trading_rl.serving.alerts import packaged_alerting
from trading_rl.serving.request import TIMESTAMP_FIELD, RequestLimits, request_size

# The inference-config keys the feature-parameter digest covers: everything that turns bars into the
# observation's feature window.
DIGESTED_KEYS = ("feature_params", "scaler", "feature_columns")


@dataclass(frozen=True, kw_only=True)
class ServingParams(Section):
    """The ``serving`` parameter section: what the served model refuses, stored in it when the export
    pipeline packages it. ``max_request_bytes`` is the request's size as compact JSON
    (``serving.request.request_size``)."""

    max_request_bytes: int = setting(1_000_000, interval="[1, inf)")


def feature_params_digest(config: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the feature parameters, scaler and feature columns of an inference (or
    serving) config, as canonical JSON: equal digests, equal features from equal bars."""
    payload = json.dumps({key: config[key] for key in DIGESTED_KEYS}, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


def bar_interval(index: pd.DatetimeIndex) -> pd.Timedelta:
    """The median spacing of ``index`` (weekends and holidays do not move it for daily bars)."""
    if len(index) < 2:
        raise ValueError(f"a bar spacing needs at least 2 bars, got {len(index)}")
    return pd.Timedelta(int(np.median(np.diff(index.asi8))), unit="ns")


@dataclass(frozen=True)
class StoredServing:
    """The typed sections of a serving config."""

    env_config: EnvConfig
    feature_params: FeatureParams
    safeguards: SafeguardConfig
    alerting: AlertingParams


def read_serving_config(config: Mapping[str, Any]) -> StoredServing:
    """A stored serving config's env config, feature parameters, safeguards and alerting read into
    their sections, once (``ConfigError`` naming the stored key), after its digest is checked: a
    config whose features were edited after it was built is refused. A config packaged before the
    served model alerted has no ``alerting``: the section's defaults."""
    digest = feature_params_digest(config)
    if digest != config.get("feature_params_digest"):
        raise ValueError(
            f"serving_config: feature_params_digest {config.get('feature_params_digest')!r} does not match its "
            f"feature parameters, scaler and columns ({digest}): the config was edited after it was built"
        )
    env_config, feature_params = stored_sections(config, "serving_config")
    safeguards = stored_section(SafeguardConfig, config.get("safeguards") or {}, "serving_config.safeguards")
    alerting = stored_section(AlertingParams, config.get("alerting"), "serving_config.alerting")
    return StoredServing(env_config, feature_params, safeguards, alerting)


def min_bars(config: Mapping[str, Any]) -> int:
    """The bars one decision needs: the longest feature's warm-up plus the observation window."""
    env_config, feature_params = stored_sections(config, "serving_config")
    return max_lookback(feature_params) + env_config.window_size


def request_limits(config: Mapping[str, Any]) -> RequestLimits:
    env_config, _ = stored_sections(config, "serving_config")
    return RequestLimits(
        symbol=str(config["symbol"]),
        min_bars=int(config["min_bars"]),
        bar_interval=pd.Timedelta(seconds=float(config["bar_interval_seconds"])),
        timezone=config["timezone"],
        allow_short=env_config.allow_short,
        max_request_bytes=int(config["max_request_bytes"]),
    )


def example_request(bars: pd.DataFrame, config: Mapping[str, Any]) -> dict[str, Any]:
    """A request on every bar of ``bars`` (oldest first) for a flat account with the env's initial
    cash, before its first decision."""
    columns: dict[str, list[Any]] = {TIMESTAMP_FIELD: [stamp.isoformat() for stamp in bars.index]}
    columns.update({name: bars[name].astype(float).tolist() for name in BAR_COLUMNS})
    return {
        "symbol": config["symbol"],
        "bars": columns,
        "portfolio": {"cash": float(config["env_config"]["initial_cash"]), "position": 0.0, "last_action": None},
    }


@dataclass(frozen=True)
class ServedPackage:
    """The exported actor (``onnx``), the serving config (plain data) and an example request."""

    onnx: bytes
    config: dict[str, Any]
    example: dict[str, Any]

    @property
    def model_version(self) -> str:
        return str(self.config["model_version"])

    @property
    def source_dataset(self) -> str:
        return str(self.config["source_dataset"])


def served_package(
    onnx: bytes,
    inference_config: Mapping[str, Any],
    history: pd.DataFrame,
    decision_bar: pd.Timestamp,
    model_version: str,
    source_dataset: str,
    params: ServingParams,
    alerting: AlertingParams,
) -> ServedPackage:
    """The package of an exported actor: ``inference_config`` plus ``model_version`` (the trained
    agent's save version), ``source_dataset`` (its catalog name), the bar spacing and time zone of
    ``history`` (the symbol's OHLCV bars from the first bar its features were computed on, oldest
    first), the bars a decision needs, ``params``' size limit and ``alerting`` (without the webhook's
    URL: ``serving.alerts.packaged_alerting``). The example request is ``history``
    up to ``decision_bar`` for a flat account: with the env's first decision bar of a split, its
    answer is that step of the env."""
    index = pd.DatetimeIndex(history.index)
    config = {
        **dict(inference_config),
        "model_version": model_version,
        "source_dataset": source_dataset,
        "bar_interval_seconds": bar_interval(index).total_seconds(),
        "timezone": None if index.tz is None else str(index.tz),
        "max_request_bytes": params.max_request_bytes,
        "alerting": packaged_alerting(alerting),
    }
    config["min_bars"] = min_bars(config)
    config["feature_params_digest"] = feature_params_digest(config)
    bars = history.loc[:decision_bar]
    if len(bars) < config["min_bars"]:
        raise ValueError(
            f"the example request up to {decision_bar} has {len(bars)} bars, a decision needs {config['min_bars']}"
        )
    example = example_request(bars, config)
    size = request_size(example)
    if size > params.max_request_bytes:  # a long intraday history: the latest bars that fit the limit
        keep = max(config["min_bars"], int(len(bars) * 0.9 * params.max_request_bytes / size))
        example = example_request(bars.iloc[-keep:], config)
    return ServedPackage(bytes(onnx), config, example)
