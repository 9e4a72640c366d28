"""The deployed model's forward data: its symbol's prices read like ``feature_extraction`` reads them,
the features rebuilt with the model's frozen parameters and scaler, cut into the validation split and
the forward split; or ``NotDeployed`` (with the reason) when nothing usable is deployed.

The deployed model is the registry alias ``trading_rl_sac_icm@champion`` (``datasets.registry``).
Every node of the forward pipeline accepts "nothing promoted" (``forward_data`` is ``NotDeployed``):
``kedro run --pipelines validation`` then writes an unchanged record and reports "not checked" with
the reason instead of failing (``unless_deployed``).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from trading_rl.data import by_symbol, load_validated_prices, validate_features
from trading_rl.envs import EnvSpec, build_env_spec
from trading_rl.envs.compatibility import check_model_fits_spec
from trading_rl.envs.deployment import Deployment, NoDeploymentMetadata
from trading_rl.features import apply_scaler, compute_features
from trading_rl.features.params import FeatureExtractionParams

logger = logging.getLogger(__name__)

FORWARD_SPLIT = "forward"


@dataclass
class ForwardData:
    """The rebuilt env spec (splits ``validation`` and, once new bars exist, ``forward``) and the
    unscaled features of every bar, for drift."""

    deployment: Deployment
    spec: EnvSpec
    features: pd.DataFrame

    @property
    def has_new_bars(self) -> bool:
        return FORWARD_SPLIT in self.spec.prices

    def make_env(self, split: str = FORWARD_SPLIT, **overrides: Any):
        return self.spec.make_env(split, **overrides)


def forward_data(deployment: Deployment, prices: pd.DataFrame, source: str) -> ForwardData:
    """Features of ``prices`` with the deployment's parameters and scaler, cut into the validation
    split and the forward split: from the deployment's last bar (the first forward decision) to the
    newest bar. ``ValueError`` naming ``source`` when the file ends before the deployment's data."""
    end = prices.index[-1]
    if end < deployment.data_end:
        raise ValueError(
            f"{source} ends at {end}, before the deployed model's last training-run bar {deployment.data_end}: "
            "a scheduled rerun needs the file the model was trained on, extended by the new bars"
        )
    if deployment.data_end not in prices.index:
        raise ValueError(f"{source} has no bar at the deployed model's last training-run bar {deployment.data_end}")
    features = validate_features(
        compute_features(prices, deployment.feature_params).dropna(how="any"), f"features of {source}"
    )
    splits: dict[str, Any] = {"validation": deployment.splits["validation"]}
    if end > deployment.data_end:
        splits[FORWARD_SPLIT] = {"start": deployment.data_end.isoformat(), "end": end.isoformat()}
    spec = build_env_spec(
        deployment.symbol,
        prices,
        apply_scaler(features, deployment.feature_scaler),
        splits,
        config=deployment.env_config,
        periods_per_year=deployment.periods_per_year,
        feature_scaler=deployment.feature_scaler,
    )
    return ForwardData(deployment, spec, features)


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
