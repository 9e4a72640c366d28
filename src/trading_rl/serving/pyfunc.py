"""The served model as an MLflow ``PythonModel``: ``{"inputs": [request]}`` in, ``{"predictions":
[response]}`` out, through MLflow's own scoring server (``mlflow models serve -m
"models:/trading_rl_sac_icm@champion" --env-manager local``).

Why a ``PythonModel`` around ``SignalEngine`` and not kedro-mlflow's ``pipeline_ml_factory`` /
``KedroPipelineModel``: the inference path already is one object, ``SignalEngine`` (the ONNX actor
that the export pipeline checked against the policy, the stored feature parameters and scaler, the
env's own trade rule), exactly equal to the env over the validation split; a served decision also
carries state across requests (the latest bar decided, the safeguards' day and peak), which a Kedro
pipeline run per request would not keep; and a Kedro session per request costs more than the whole
decision. Docs: docs/serve.md.

The model is logged "from code" (``serving/mlflow_model.py``), its artifacts plain files (the ONNX
actor and the serving config as JSON): nothing pickled. Inputs and outputs are typed by the
``predict`` hints (a list of JSON objects), so MLflow hands the request over as parsed JSON and the
checks, with messages naming the field, are the model's own (``serving.request``).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from pathlib import Path
from typing import Any

from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
from mlflow.pyfunc import PythonModel

from trading_rl.serving.alerts import served_alert_queue
from trading_rl.serving.decider import Decider
from trading_rl.serving.decision_log import DecisionLog
from trading_rl.serving.package import read_serving_config
from trading_rl.serving.request import RequestError

ACTOR_ARTIFACT = "actor"
CONFIG_ARTIFACT = "serving_config"


class InvalidRequest(MlflowException):
    """A refused request as the scoring server's HTTP 400: ``{"error_code": "INVALID_PARAMETER_VALUE",
    "message": "<field>: <reason>", "field": "<field>"}``.

    The scoring server rewrites the message of an ``MlflowException`` raised in ``predict`` to
    ``Failed to predict data '<the whole request>' ...`` (``mlflow.pyfunc.scoring_server.invocations``);
    this one keeps its own message, so the response names the field without echoing the request
    (tests/serving/test_serving_http.py checks the body).
    """

    def __init__(self, error: RequestError):
        super().__init__(str(error), error_code=INVALID_PARAMETER_VALUE, field=error.field)

    @property
    def message(self) -> str:
        return self._message

    @message.setter
    def message(self, value: str) -> None:
        if not hasattr(self, "_message"):
            self._message = value


# MLflow warns at the class definition and when it logs the model that it does not validate the
# values of a ``dict[str, Any]``: the model validates them itself (``serving.request``).
NOT_VALIDATED_WARNING = "Any type hint is inferred as AnyType"


@contextlib.contextmanager
def any_values_unvalidated_quietly():
    """Leave out MLflow's warning that ``Any`` values are not validated; show every other warning.
    (MLflow sets its own ``once`` filter around the call that warns, so a filter set here would not
    hold: the warnings are recorded and the others shown again.)"""
    with warnings.catch_warnings(record=True) as caught:
        yield
    for warning in caught:
        if NOT_VALIDATED_WARNING not in str(warning.message):
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)


with any_values_unvalidated_quietly():

    class ServedSignalModel(PythonModel):
        """Latest bars + portfolio -> target position, signal, actions, safeguard verdict, confidence,
        model version and feature-parameter digest (``serving.decider``); one ``Decider`` per loaded
        model, its decision log ``DecisionLog.configured()``."""

        def load_context(self, context) -> None:
            # The features' GARCH filter imports scipy.signal (and with it scipy.stats) where it runs,
            # so that `kedro` commands start without it; load it with the model, not in the first
            # request (about 0.4 s).
            import scipy.signal  # noqa: F401

            config = json.loads(Path(context.artifacts[CONFIG_ARTIFACT]).read_text())
            onnx = Path(context.artifacts[ACTOR_ARTIFACT]).read_bytes()
            alerts = served_alert_queue(read_serving_config(config).alerting)
            self._decider = Decider(onnx, config, DecisionLog.configured(), alerts)

        @property
        def decider(self) -> Decider:
            return self._decider

        def predict(
            self, context, model_input: list[dict[str, Any]], params: dict[str, Any] | None = None
        ) -> list[dict[str, Any]]:
            if len(model_input) != 1:
                error = RequestError("inputs", f"one request per call, got {len(model_input)}")
                self._decider.refuse(error)
                raise InvalidRequest(error)
            try:
                return [self._decider.decide(model_input[0])]
            except RequestError as error:
                raise InvalidRequest(error) from None
