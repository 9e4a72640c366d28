"""What a deployed model carries to be scored on bars after its training: the deployment block of its
metadata, written when it is trained (``deployment_metadata``, by the sac_icm phase) and read back
into typed sections where it is loaded (``Deployment.from_model``, by the forward phase and the
served model)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from trading_rl.config import stored_section
from trading_rl.envs.continuous import EnvConfig
from trading_rl.envs.spec import EnvSpec
from trading_rl.features.indicators import FeatureParams


def deployment_metadata(env_spec: EnvSpec, feature_params: Mapping[str, Any]) -> dict[str, Any]:
    """What a rerun needs to rebuild the model's observations on new bars; stored in the model's
    ``trading_rl_metadata["deployment"]``: env config, feature parameters (fitted GARCH included),
    scaler, split dates and ``data_end``, the last bar the training run had."""
    if env_spec.feature_scaler is None or env_spec.closes is None:
        raise ValueError(
            f"env spec of {env_spec.symbol} has no feature scaler or close history (built before they were "
            "stored); rerun `kedro run --pipelines env_construction`"
        )
    return {
        "symbol": env_spec.symbol,
        "env_config": env_spec.config_data(),
        "periods_per_year": env_spec.periods_per_year,
        "feature_params": dict(feature_params),
        "feature_scaler": dict(env_spec.feature_scaler),
        "splits": {name: {"start": str(b["start"]), "end": str(b["end"])} for name, b in env_spec.splits.items()},
        "data_end": env_spec.closes.index[-1].isoformat(),
    }


def stored_sections(block: Mapping[str, Any], stored: str) -> tuple[EnvConfig, FeatureParams]:
    """The env config and feature parameters of a stored block (a deployed model's deployment block,
    an exported actor's inference config) read into typed sections, once, where the file is read;
    ``ConfigError`` naming the stored key (``<stored>.env_config...``) when one is not valid."""
    return (
        stored_section(EnvConfig, block["env_config"], f"{stored}.env_config"),
        stored_section(FeatureParams, block["feature_params"], f"{stored}.feature_params"),
    )


class NoDeploymentMetadata(ValueError):
    """The model carries no deployment block: it was trained before forward tracking existed."""


@dataclass(frozen=True)
class Deployment:
    """The deployment block of a model's metadata (``deployment_metadata``), read once into typed
    sections where the model is loaded."""

    model_version: str
    symbol: str
    env_config: EnvConfig
    periods_per_year: float
    feature_params: FeatureParams
    feature_scaler: dict[str, Any]
    splits: dict[str, dict[str, str]]
    data_end: pd.Timestamp

    @classmethod
    def from_model(cls, model: Any, dataset: str = "deployed_model") -> Deployment:
        """The deployment block of ``model``'s metadata; ``NoDeploymentMetadata`` naming ``dataset``
        without one, ``ConfigError`` naming the stored key when its env config or feature parameters
        are not valid."""
        metadata = dict(getattr(model, "trading_rl_metadata", None) or {})
        block = metadata.get("deployment")
        if not block:
            raise NoDeploymentMetadata(
                f"dataset '{dataset}' (version {metadata.get('save_version')}) carries no deployment metadata "
                "(trained before forward tracking existed): retrain it with `kedro run --pipelines "
                "feature_extraction,env_construction,sac_icm`"
            )
        env_config, feature_params = stored_sections(block, f"{dataset}.trading_rl_metadata.deployment")
        return cls(
            model_version=str(metadata.get("save_version")),
            symbol=block["symbol"],
            env_config=env_config,
            periods_per_year=float(block["periods_per_year"]),
            feature_params=feature_params,
            feature_scaler=dict(block["feature_scaler"]),
            splits=dict(block["splits"]),
            data_end=pd.Timestamp(block["data_end"]),
        )
