"""The deployed agent served over HTTP as one MLflow pyfunc model (docs/serve.md).

- ``package``: what the served model is made of (``served_package``: the exported actor, the
  serving config, an example request; ``ServingParams``, the ``serving`` parameter section).
- ``request``: one request checked field by field (``parse_request``, ``RequestError``).
- ``decider``: decisions with their state across requests and the decision log (``Decider``).
- ``alerts``: the ``monitoring.alerting`` rules on the served account's decisions, sent through the
  configured channels off the response path (``AlertQueue``, ``served_alert_queue``).
- ``pyfunc``: the MLflow ``PythonModel`` (``ServedSignalModel``); ``mlflow_model`` is the file MLflow
  logs it from.

No Kedro here: the export pipeline builds the package, the MLflow hooks log and register it.
"""

from trading_rl.serving.alerts import ALERT_WEBHOOK_ENV, ALERTS_FILE_ENV, AlertQueue, served_alert_queue
from trading_rl.serving.decider import Decider
from trading_rl.serving.decision_log import DECISION_LOG_ENV, DecisionLog
from trading_rl.serving.package import ServedPackage, ServingParams, feature_params_digest, served_package
from trading_rl.serving.request import RequestError, RequestLimits, parse_request

__all__ = [
    "ALERTS_FILE_ENV",
    "ALERT_WEBHOOK_ENV",
    "AlertQueue",
    "DECISION_LOG_ENV",
    "Decider",
    "DecisionLog",
    "RequestError",
    "RequestLimits",
    "ServedPackage",
    "ServingParams",
    "feature_params_digest",
    "parse_request",
    "served_alert_queue",
    "served_package",
]
