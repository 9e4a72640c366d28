"""MLflow "model from code" for an SB3 agent's deterministic policy (``predict(observations) ->
actions``). ``mlflow_tracking.log_sb3_model`` logs this file with the agent zip as an artifact,
so the logged model holds no pickled Python object."""

from __future__ import annotations

import importlib
from pathlib import Path

import mlflow
import numpy as np
from mlflow.pyfunc import PythonModel


class SB3PolicyModel(PythonModel):
    # Inputs are validated by the logged tensor signature, not by type hints on predict (MLflow
    # supports no ndarray hint and would warn about the missing one on every load).
    _skip_type_hint_validation = True

    def load_context(self, context) -> None:
        module_name, _, class_name = Path(context.artifacts["model_class"]).read_text().strip().rpartition(".")
        model_class = getattr(importlib.import_module(module_name), class_name)
        self._agent = model_class.load(context.artifacts["agent"], device="cpu")

    def predict(self, context, model_input, params=None):
        observations = np.asarray(model_input, dtype=np.float32)
        actions, _ = self._agent.predict(observations, deterministic=True)
        return np.asarray(actions, dtype=np.float32)


mlflow.models.set_model(SB3PolicyModel())
