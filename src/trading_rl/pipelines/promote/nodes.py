"""Thin node around ``trading_rl.integration.model_registry.promotion``."""

from __future__ import annotations

import getpass
import logging
from typing import Any

from trading_rl.integration.model_registry import PromoteParams, promotion

logger = logging.getLogger(__name__)


def promote_model(
    registry: dict[str, Any], config: PromoteParams, run_metadata: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The alias move (to the registry and as the run's ``promotion_report``); the version is checked
    to exist and to have passed every gate it was registered with."""
    decision = promotion(
        registry["registered_model"],
        registry["versions"],
        config.version,
        config.alias,
        by=getpass.getuser(),
        at=str(run_metadata["save_version"]),
    )
    logger.info(
        "promote: %s@%s -> version %s (was %s); gates %s",
        decision["registered_model"],
        decision["alias"],
        decision["version"],
        decision["previous_version"],
        decision["gates"],
    )
    if not decision["serving"]:
        logger.warning(
            "promote: %s version %s is not a served model (registered before serving existed, or by hand): "
            "`mlflow models serve` on it takes observation tensors, not bars (docs/serve.md); a run whose gates "
            "pass registers a served version",
            decision["registered_model"],
            decision["version"],
        )
    return decision, decision
