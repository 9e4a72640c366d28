"""Thin nodes around ``trading_rl.phases.forward`` and ``monitoring.drift``.

The deployed model is the registry alias ``trading_rl_sac_icm@champion`` (``datasets.registry``).
Every node accepts "nothing promoted" (``forward_data`` is ``NotDeployed``): ``kedro run --pipelines
validation`` then writes an unchanged record and reports "not checked" with the reason instead of failing.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from trading_rl.data import by_symbol, load_validated_prices
from trading_rl.envs.compatibility import check_model_fits_spec
from trading_rl.envs.deployment import Deployment, NoDeploymentMetadata
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, env_tearsheet
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.phases.forward import (
    FORWARD_SPLIT,
    ForwardData,
    ForwardParams,
    decay_alerts,
    empty_record,
    extend_record,
    forward_data,
    forward_drift,
    forward_report,
    replay,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NotDeployed:
    """``forward_data`` when no usable model is deployed (a MemoryDataset refuses ``None``)."""

    reason: str


Inputs = ForwardData | NotDeployed


def unless_deployed(outcome: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A node that runs on a deployed model's ``data`` (``ForwardData``); given ``NotDeployed`` it
    returns ``outcome(**the node's arguments)`` instead: the one place the nodes tell the two apart."""

    def decorate(node: Callable[..., Any]) -> Callable[..., Any]:
        names = list(inspect.signature(node).parameters)

        @functools.wraps(node)
        def run(*args: Any, **kwargs: Any) -> Any:
            arguments = {**dict(zip(names, args)), **kwargs}
            if isinstance(arguments["data"], NotDeployed):
                return outcome(**arguments)
            return node(*args, **kwargs)

        return run

    return decorate


def prepare_forward_data(
    deployed_model: Any,
    registry_deployment: dict[str, Any],
    raw_price_files: dict[str, Callable[[], pd.DataFrame]],
    section: FeatureExtractionParams,
) -> Inputs:
    """The deployed model's symbol read and validated like ``feature_extraction`` does, its features
    rebuilt with the model's frozen parameters and scaler; ``NotDeployed`` (with the registry's
    reason) when no version is promoted."""
    if deployed_model is None:
        logger.warning("forward: not checked: %s", registry_deployment["reason"])
        return NotDeployed(registry_deployment["reason"])
    logger.info("forward: deployed %s", registry_deployment["reason"])
    try:
        deployment = Deployment.from_model(deployed_model)
    except NoDeploymentMetadata as error:  # a model trained before forward tracking: validation must still run
        logger.warning("forward: %s", error)
        return NotDeployed("deployed model has no deployment metadata")
    entries = [entry for entry in section.symbols if entry.name == deployment.symbol]
    if not entries:
        raise ValueError(
            f"the deployed model trades {deployment.symbol!r}, which is not among feature_extraction.symbols "
            f"{[entry.name for entry in section.symbols]}"
        )
    prices = by_symbol(load_validated_prices(entries, raw_price_files, section.min_rows))[deployment.symbol]
    source = f"{entries[0].source} prices of {deployment.symbol}"
    data = forward_data(deployment, prices, source)
    check_model_fits_spec(
        deployed_model, data.spec, model_dataset="deployed_model", spec_dataset=source, pipeline="forward"
    )
    return data


@unless_deployed(lambda previous_record, **_: empty_record() if previous_record is None else previous_record)
def score_forward_bars(
    deployed_model: Any,
    data: ForwardData,
    previous_record: pd.DataFrame | None,
    run_metadata: dict[str, Any],
    params: ForwardParams,
) -> pd.DataFrame:
    """The previous record plus every forward bar it lacks (``extend_record``); with
    ``forward.supersede_record`` the replay replaces it."""
    replayed = replay(deployed_model, data) if data.has_new_bars else empty_record()
    record, new_bars = extend_record(
        previous_record,
        replayed,
        data.deployment.model_version,
        str(run_metadata["save_version"]),
        supersede=params.supersede_record,
    )
    if record.empty:
        logger.info("forward: no bar after the deployed model's data end %s yet", data.deployment.data_end)
        return record
    logger.info(
        "forward: %d new bar(s) scored; the record of model %s holds %d bars up to %s",
        new_bars,
        data.deployment.model_version,
        len(record),
        record["timestamp"].iloc[-1],
    )
    return record


@unless_deployed(
    lambda data, deployment, **_: {"status": "not checked", "reason": data.reason, "deployment": deployment}
)
def report_forward(
    record: pd.DataFrame, data: ForwardData, deployment: dict[str, Any], run_metadata: dict[str, Any], seed: int
) -> dict[str, Any]:
    """The record's metrics next to the baselines on the same bars and costs, and which registry
    version is deployed and why (or why nothing is)."""
    scored_now = int((record["scored_in"] == str(run_metadata["save_version"])).sum()) if len(record) else 0
    return {**forward_report(record, data, scored_now, seed), "deployment": deployment}


@unless_deployed(
    lambda data, **_: {"status": data.reason, "features": [], "drifted_features": [], "actions": None, "window": None}
)
def measure_forward_drift(
    deployed_model: Any, data: ForwardData, record: pd.DataFrame, params: ForwardParams
) -> dict[str, Any]:
    """Feature drift of the newest forward bars against the training split; the agent's action drift."""
    return forward_drift(deployed_model, data, record, params.drift)


def check_forward_decay(
    report: dict[str, Any],
    record: pd.DataFrame,
    drift: dict[str, Any],
    walk_forward_folds: pd.DataFrame,
    params: ForwardParams,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``forward_alerts`` and this rerun's MLflow metrics (``forward_metrics``); every alert is
    logged at WARNING (and again by the end-of-run summary)."""
    alerts = decay_alerts(report, record, drift, walk_forward_folds, params)
    for check in alerts["checks"]:
        if check["status"] == "alert":
            logger.warning(
                "forward alert %s on model %s: %s (value %s, expected %s)",
                check["check"],
                alerts["model_version"],
                check["meaning"],
                check["value"],
                check["expected"],
            )
    return alerts, forward_metrics(report, alerts)


def forward_metrics(report: dict[str, Any], alerts: dict[str, Any]) -> dict[str, Any]:
    """One point per rerun at the record's length: the deployed agent's Sharpe, return and drawdown
    on every forward bar so far, the bars, and the alert / pending counts (nothing when not checked)."""
    if alerts.get("passed") is None:
        return {}
    step = int(report["n_bars"])
    values = {key: report["metrics"].get(key) for key in ("sharpe", "total_return", "max_drawdown")}
    values.update(
        n_bars=report["n_bars"],
        new_bars=report["new_bars"],
        alerts=len(alerts["alerts"]),
        pending=sum(check["status"] == "pending" for check in alerts["checks"]),
    )
    return {key: {"value": value, "step": step} for key, value in values.items()}


@unless_deployed(lambda data, **_: TearsheetInput(f"forward: not checked: {data.reason}", 0.1, []))
def forward_tearsheet(
    record: pd.DataFrame, data: ForwardData, drift: dict[str, Any], seed: int, regime_validation: RegimeValidationParams
) -> TearsheetInput:
    """Equity since deployment against the baselines on the forward bars, and the drift table."""
    if not data.has_new_bars:
        return TearsheetInput(f"forward: not checked: no bars after {data.deployment.data_end.date()} yet", 0.1, [])
    tearsheet = env_tearsheet(
        "forward", {"deployed": record}, data.spec, FORWARD_SPLIT, data.make_env, seed, regime_validation
    )
    rows = sorted(drift["features"], key=lambda row: -(row["psi"] if row["psi"] == row["psi"] else 0.0))
    section = tearsheet.sections[0]
    section.notes.append(
        f"model {data.deployment.model_version}, deployed with bars up to {data.deployment.data_end.date()}; "
        f"drift window {drift['window']['first_bar'][:10]} .. {drift['window']['last_bar'][:10]} "
        f"({drift['window']['n_bars']} bars) against the {drift['window']['reference']}"
    )
    section.notes += [
        f"{row['feature']}: PSI {row['psi']:.3f}, KS {row['ks_statistic']:.3f} (p {row['ks_pvalue']:.3g})"
        + (" DRIFTED" if row["drifted"] else "")
        for row in rows
    ]
    actions = drift["actions"]
    section.notes.append(
        f"actions: PSI {actions['psi']:.3f} against the validation split" + (" DRIFTED" if actions["drifted"] else "")
    )
    return tearsheet
