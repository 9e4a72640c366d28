"""MLflow "model from code" for an agent's deterministic policy (``predict(observations) ->
actions``). ``mlflow_tracking.log_agent_model`` logs this file with the agent's bytes as an
artifact, so the logged model holds no pickled Python object.

The agent loads as ``algorithms.saved.load_agent`` loads it (the hierarchical agent acts through its
option-conditioned SAC, ``mlflow_tracking.policy_of``). A Dict observation (HER) comes
in as one named tensor per entry."""

from __future__ import annotations

import importlib
from pathlib import Path

import mlflow
import numpy as np
from mlflow.pyfunc import PythonModel

from trading_rl.algorithms.saved import load_agent
from trading_rl.integration.mlflow_tracking import policy_of


class SB3PolicyModel(PythonModel):
    # Inputs are validated by the logged tensor signature, not by type hints on predict (MLflow
    # supports no ndarray hint and would warn about the missing one on every load).
    _skip_type_hint_validation = True

    def load_context(self, context) -> None:
        module_name, _, class_name = Path(context.artifacts["model_class"]).read_text().strip().rpartition(".")
        model_class = getattr(importlib.import_module(module_name), class_name)
        self._policy = policy_of(load_agent(Path(context.artifacts["agent"]).read_bytes(), model_class))

    def predict(self, context, model_input, params=None):
        if isinstance(model_input, dict):
            observations = {key: np.asarray(value, dtype=np.float32) for key, value in model_input.items()}
        else:
            observations = np.asarray(model_input, dtype=np.float32)
        actions, _ = self._policy.predict(observations, deterministic=True)
        return np.asarray(actions, dtype=np.float32)


mlflow.models.set_model(SB3PolicyModel())
