"""MLflow conventions of the project, usable without Kedro: metric keys, run names, agents logged as
MLflow models with signatures, and the gate check that decides whether a model is registered.

- Metric keys are ``<phase>/<group>/<metric>`` and only finite values are logged (MLflow would
  store a NaN and draw a broken curve).
- An agent is logged as a ``pyfunc`` model (observation batch in, deterministic action batch out)
  and an exported ONNX actor with the ``onnx`` flavour, each with a tensor signature taken from the
  observation shape. An SB3 agent is its own policy; the hierarchical agent (``options_her``) is
  logged whole, and its model is the option-conditioned SAC it acts through (``low_level``: the
  env observation with the active option's one-hot appended, plus the goals under HER).
- The served model (``serving``: bars and portfolio in, a guarded signal out, over MLflow's scoring
  server) is logged as a ``pyfunc`` from code with the ONNX actor and its serving config as
  artifacts, an example request as input example and the versions it was built with pinned.
- A model version is registered only when every gate report named for it passed.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

import gymnasium as gym
import mlflow
import numpy as np
from mlflow.models import ModelSignature
from mlflow.types import Schema, TensorSpec

from trading_rl.algorithms.saved import agent_bytes
from trading_rl.serving.alerts import ALERT_WEBHOOK_ENV, ALERTS_FILE_ENV
from trading_rl.serving.decision_log import DECISION_LOG_ENV
from trading_rl.serving.package import ServedPackage

REQUIREMENTS = ("stable-baselines3", "torch", "gymnasium", "numpy")
# The project dependencies the served model's code imports (the package itself is the project's
# install: serve with `--env-manager local` from its environment), pinned at the installed versions;
# tests/serving/test_serving_decider.py checks the list against the imports and pyproject.toml. arch
# (the GARCH fit) and matplotlib (drawing) are imported only where they run, never at serve time.
SERVED_REQUIREMENTS = (
    "mlflow",
    "numpy",
    "pandas",
    "pyarrow",
    "scipy",
    "pandera",
    "gymnasium",
    "stable-baselines3",
    "torch",
    "onnxruntime",
    "rich",
    "tqdm",
)
# What a registered served model's version is tagged with (``model_registry.SERVED_TAG``): `promote`
# warns about a version without it (registered before the served model existed: observations in).
SERVED_REQUEST = "bars and portfolio in, signal out (docs/serve.md)"
# The step a model is logged at as a run output. MLflow 3 links every run metric logged without a
# model id to the run's models logged at the metric's step; at step 0 (its default) every phase's
# final metrics and gates would be linked to every model of the run. Models' own metrics are
# logged with their model id instead (``mlflow_hooks``).
MODEL_OUTPUT_STEP = -1
NOT_PRODUCED = "not produced by this run"


def metric_key(prefix: str, name: str) -> str:
    """``prefix/name`` without repeating a segment ``name`` already starts with
    (``sac_icm`` + ``sac_icm/eval/sharpe`` → ``sac_icm/eval/sharpe``)."""
    prefix = prefix.strip("/")
    if not prefix or name == prefix or name.startswith(prefix + "/"):
        return name
    return f"{prefix}/{name}"


def is_loggable(value: Any) -> bool:
    """A finite real number (bools and NaN/inf are not metrics)."""
    return (
        isinstance(value, (int, float, np.floating, np.integer))
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def run_name(pipelines: Iterable[str] | None, symbol: str | None, save_version: str) -> str:
    """``export + sac_icm · sp500 · 2026-11-26T10.00.00.000Z``: what ran (sorted, so the same pipelines
    give the same name whatever order ``--pipelines`` listed them in), on what, which save version."""
    return " · ".join([" + ".join(sorted(pipelines or ["__default__"])), symbol or "no symbol", save_version])


def gate_verdict(report: Mapping[str, Any]) -> tuple[bool, str]:
    """(passed, why) of a gate report: a validation report (``passed``/``failed``) or a collapse
    report (``collapsed``)."""
    if "passed" in report:
        failed = report.get("failed") or []
        return bool(report["passed"]), "passed" if report["passed"] else "failed: " + ", ".join(map(str, failed))
    if "collapsed" in report:
        collapsed = bool(report["collapsed"])
        return not collapsed, "collapsed" if collapsed else "not collapsed"
    raise ValueError(f"not a gate report (no 'passed' or 'collapsed' key): keys {sorted(report)}")


def observation_signature(
    observation_shape: tuple[int, ...],
    action_shape: tuple[int, ...],
    input_name: str | None = None,
    output_name: str | None = None,
) -> ModelSignature:
    """Float32 tensors with a free batch axis: ``(-1, *observation_shape)`` → ``(-1, *action_shape)``."""
    return ModelSignature(
        inputs=Schema([TensorSpec(np.dtype(np.float32), (-1, *observation_shape), input_name)]),
        outputs=Schema([TensorSpec(np.dtype(np.float32), (-1, *action_shape), output_name)]),
    )


def policy_of(agent: Any) -> Any:
    """The SB3 model that maps an observation to an action: the agent itself, or the hierarchical
    agent's option-conditioned ``low_level`` SAC."""
    return getattr(agent, "low_level", agent)


def _policy_signature(policy: Any) -> tuple[ModelSignature, Any]:
    """Signature and input example of an SB3 policy: one tensor, or one named tensor per entry of a
    Dict observation (HER's ``observation``, ``achieved_goal``, ``desired_goal``)."""
    space, action_shape = policy.observation_space, tuple(policy.action_space.shape)
    if not isinstance(space, gym.spaces.Dict):
        observation_shape = tuple(space.shape)
        return (
            observation_signature(observation_shape, action_shape),
            np.zeros((1, *observation_shape), dtype=np.float32),
        )
    shapes = {key: tuple(sub.shape or ()) for key, sub in space.spaces.items()}
    inputs = Schema([TensorSpec(np.dtype(np.float32), (-1, *shape), key) for key, shape in shapes.items()])
    outputs = Schema([TensorSpec(np.dtype(np.float32), (-1, *action_shape))])
    example = {key: np.zeros((1, *shape), dtype=np.float32) for key, shape in shapes.items()}
    return ModelSignature(inputs=inputs, outputs=outputs), example


def log_agent_model(agent: Any, name: str, metadata: Mapping[str, Any] | None = None):
    """Log ``agent`` (an SB3 agent or the hierarchical agent) to the active run as a pyfunc model
    named ``name`` (code: ``mlflow_sb3_policy.py``, the agent's own bytes as an artifact); returns
    the ModelInfo."""
    signature, input_example = _policy_signature(policy_of(agent))
    model_class = f"{type(agent).__module__}.{type(agent).__qualname__}"
    with tempfile.TemporaryDirectory() as folder:
        path, class_file = Path(folder) / "agent.zip", Path(folder) / "model_class.txt"
        path.write_bytes(agent_bytes(agent))
        class_file.write_text(model_class)  # an artifact: model_config would also be logged as run params
        return mlflow.pyfunc.log_model(
            name=name,
            python_model=str(Path(__file__).with_name("mlflow_sb3_policy.py")),
            artifacts={"agent": str(path), "model_class": str(class_file)},
            signature=signature,
            input_example=input_example,
            pip_requirements=pinned(REQUIREMENTS),
            metadata=dict(metadata or {}),
            step=MODEL_OUTPUT_STEP,
        )


@contextlib.contextmanager
def _environment(values: Mapping[str, str]):
    """``os.environ`` with ``values`` for the duration, restored after."""
    previous = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def pinned(packages: Iterable[str]) -> list[str]:
    """``package==<installed version>`` for each of ``packages``."""
    return [f"{package}=={version(package)}" for package in packages]


@contextlib.contextmanager
def _served_model_arguments(package: ServedPackage, metadata: Mapping[str, Any] | None):
    """The arguments of ``mlflow.pyfunc.log_model`` / ``save_model`` for ``package``, its artifacts
    written to a temporary folder for the duration. MLflow decides the input example through
    ``predict`` while it saves the model: no decision log is written and no alert file or webhook
    is used for it."""
    from trading_rl.serving import mlflow_model, pyfunc

    config = package.config
    with (
        tempfile.TemporaryDirectory() as folder,
        _environment({DECISION_LOG_ENV: "", ALERTS_FILE_ENV: "", ALERT_WEBHOOK_ENV: ""}),
    ):
        actor, serving = Path(folder) / "actor.onnx", Path(folder) / "serving_config.json"
        actor.write_bytes(package.onnx)
        serving.write_text(json.dumps(config, indent=1, sort_keys=True))
        with pyfunc.any_values_unvalidated_quietly():
            yield {
                "python_model": str(mlflow_model.__file__),
                "artifacts": {pyfunc.ACTOR_ARTIFACT: str(actor), pyfunc.CONFIG_ARTIFACT: str(serving)},
                "input_example": [package.example],
                "pip_requirements": pinned(SERVED_REQUIREMENTS),
                "metadata": {
                    **dict(metadata or {}),
                    "symbol": config["symbol"],
                    "model_version": package.model_version,
                    "feature_params_digest": config["feature_params_digest"],
                    "min_bars": config["min_bars"],
                    "request": "docs/serve.md",
                },
            }


def log_served_model(package: ServedPackage, name: str, metadata: Mapping[str, Any] | None = None):
    """Log the served model (``serving.pyfunc`` from ``serving/mlflow_model.py``) to the active run as
    ``name``: the ONNX actor and the serving config as artifacts, the package's example request as
    input example (inputs and outputs typed by ``predict``'s hints); returns the ModelInfo."""
    with _served_model_arguments(package, metadata) as arguments:
        return mlflow.pyfunc.log_model(name=name, step=MODEL_OUTPUT_STEP, **arguments)


def save_served_model(package: ServedPackage, path: str | Path, metadata: Mapping[str, Any] | None = None) -> None:
    """The served model as an MLflow model folder at ``path``, without a tracking store
    (``mlflow models serve -m <path> --env-manager local`` serves it)."""
    with _served_model_arguments(package, metadata) as arguments:
        mlflow.pyfunc.save_model(path=str(path), **arguments)


def log_onnx_model(onnx_bytes: bytes, name: str, metadata: Mapping[str, Any] | None = None):
    """Log an exported ONNX actor with the ``onnx`` flavour; the signature is read from its graph."""
    import mlflow.onnx
    import onnx

    model = onnx.load_model_from_string(bytes(onnx_bytes))

    def spec(value_info) -> tuple[str, tuple[int, ...]]:
        dims = value_info.type.tensor_type.shape.dim
        return value_info.name, tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims[1:])

    (input_name, observation_shape), (output_name, action_shape) = (
        spec(model.graph.input[0]),
        spec(model.graph.output[0]),
    )
    return mlflow.onnx.log_model(
        model,
        name=name,
        signature=observation_signature(observation_shape, action_shape, input_name, output_name),
        pip_requirements=pinned(("onnx", "onnxruntime")),
        metadata=dict(metadata or {}),
        step=MODEL_OUTPUT_STEP,
    )


def register_if_gates_pass(
    model_uri: str,
    name: str,
    gate_reports: Mapping[str, Mapping[str, Any] | None],
    provenance: Mapping[str, Any] | None = None,
):
    """Register ``model_uri`` as a version of ``name`` when every gate report is present and passed;
    the verdicts go on the version as tags (``provenance``, e.g. the saved model's dataset and
    save version, too: deployment reads the file from it) and the reports as a run artifact
    ``gates/<name>.json``. Returns the ModelVersion, or ``None`` with the reason when not registered."""
    verdicts = {}
    for report_name, report in gate_reports.items():
        verdicts[report_name] = (False, NOT_PRODUCED) if report is None else gate_verdict(report)
    mlflow.log_dict(
        {
            "model": name,
            "verdicts": {k: {"passed": p, "why": w} for k, (p, w) in verdicts.items()},
            "reports": dict(gate_reports),
        },
        f"gates/{name}.json",
    )
    blocking = {k: why for k, (passed, why) in verdicts.items() if not passed}
    if not verdicts or blocking:
        return None, blocking or {"gates": "none declared"}
    tags = {key: str(value) for key, value in (provenance or {}).items()}
    tags.update({f"gate.{k}": why for k, (_, why) in verdicts.items()})
    model_version = mlflow.register_model(model_uri, name, tags=tags)
    run = mlflow.active_run()
    client = mlflow.MlflowClient()
    client.set_model_version_tag(
        name, model_version.version, "gate_report", f"runs:/{run.info.run_id}/gates/{name}.json" if run else ""
    )
    return model_version, {}
