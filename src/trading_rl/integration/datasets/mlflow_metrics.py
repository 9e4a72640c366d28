"""kedro-mlflow's metric-history dataset with the project's key convention and no NaN: the one place
the pipelines' metrics reach MLflow.

``prefix`` (e.g. ``sac_icm/final``) goes in front of every key the node returns, joined by ``/``
(kedro-mlflow's own ``prefix`` is joined with ``.``) and not repeated when the key already starts
with it, so keys read ``<phase>/<group>/<metric>``. Non-finite values are dropped, not stored as NaN
points.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from kedro.io import DatasetError
from kedro_mlflow.io.metrics import MlflowMetricsHistoryDataset

from trading_rl.integration.mlflow_tracking import is_loggable, metric_key

logger = logging.getLogger(__name__)


class PhaseMetricsDataset(MlflowMetricsHistoryDataset):
    def _build_args_list_from_metric_item(self, key: str, value: Any) -> Iterator[tuple[str, float, int]]:
        key = metric_key(self._prefix or "", key)
        points = [value] if isinstance(value, dict) else value
        if not isinstance(points, list) or not all(
            isinstance(p, dict) and {"value", "step"} <= p.keys() for p in points
        ):
            raise DatasetError(f"metric {key!r}: expected {{'value', 'step'}} or a list of them, got {value!r}")
        finite = [(key, float(p["value"]), int(p["step"])) for p in points if is_loggable(p["value"])]
        if len(finite) < len(points):
            logger.info("MLflow: %d non-finite value(s) of %s not logged", len(points) - len(finite), key)
        return iter(finite)
