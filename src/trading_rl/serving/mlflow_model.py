"""MLflow "model from code" of the served model: ``integration.mlflow_tracking.log_served_model``
logs this file, with the ONNX actor and the serving config as artifacts (``serving.pyfunc``)."""

import mlflow

from trading_rl.serving.pyfunc import ServedSignalModel

mlflow.models.set_model(ServedSignalModel())
