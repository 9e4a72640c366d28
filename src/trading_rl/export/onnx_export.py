"""Export the deterministic actor of an SB3 SAC agent to ONNX and check it against PyTorch.

The exported graph is ``obs -> features extractor -> latent_pi -> mu -> tanh -> action bounds``:
exactly what ``model.predict(obs, deterministic=True)`` computes, with a dynamic batch axis. It uses
torch's default (``torch.export``-based, "dynamo") exporter, which needs ``onnxscript``; the legacy
TorchScript exporter still exists in torch 2.13 but is deprecated and slated for removal.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from trading_rl.config import Section, require_not_above, setting
from trading_rl.export.safeguards import SafeguardConfig

INPUT_NAME = "observation"
OUTPUT_NAME = "action"
DEFAULT_OPSET = 18


class DeterministicActor(nn.Module):
    """SB3 SAC actor reduced to its deterministic action, mapped onto the action space bounds."""

    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, model: Any):
        super().__init__()
        policy = model.policy
        if not isinstance(policy.observation_space, spaces.Box):
            raise ValueError(f"only Box observations can be exported, got {type(policy.observation_space).__name__}")
        if not isinstance(policy.action_space, spaces.Box) or not hasattr(policy, "actor"):
            raise ValueError(
                f"{type(model).__name__} has no SAC-style actor with a Box action space; "
                "only SB3 SAC models (and subclasses) can be exported"
            )
        self.actor = copy.deepcopy(policy.actor).cpu().eval()
        self.register_buffer("low", torch.as_tensor(policy.action_space.low, dtype=torch.float32))
        self.register_buffer("high", torch.as_tensor(policy.action_space.high, dtype=torch.float32))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        mean_actions, _, _ = self.actor.get_action_dist_params(observation)
        squashed = torch.tanh(mean_actions)
        # SB3's ``unscale_action``: [-1, 1] -> [low, high] (the identity for the trading envs).
        return self.low + 0.5 * (squashed + 1.0) * (self.high - self.low)


def observation_dim(model: Any) -> int:
    shape = model.policy.observation_space.shape
    if len(shape) != 1:
        raise ValueError(f"only flat observations can be exported, got shape {shape}")
    return int(shape[0])


@contextlib.contextmanager
def _quiet_exporter_loggers():
    """torch's exporter loggers at ERROR for the duration of an export."""
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def export_actor(model: Any, opset: int = DEFAULT_OPSET) -> bytes:
    """ONNX bytes of the deterministic actor: input ``observation`` (batch, obs_dim) float32,
    output ``action`` (batch, action_dim) float32."""
    actor = DeterministicActor(model)
    example = torch.zeros((2, observation_dim(model)), dtype=torch.float32)
    batch = torch.export.Dim("batch", min=1)
    # The exporter logs its steps and triggers third-party deprecation warnings; keep both out of
    # pipeline logs (errors still raise).
    with warnings.catch_warnings(), _quiet_exporter_loggers():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            actor,
            (example,),
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            opset_version=opset,
            dynamo=True,
            dynamic_shapes=({0: batch},),
            verbose=False,
        )
    assert program is not None, "torch.onnx.export(dynamo=True) always returns an ONNXProgram"
    return program.model_proto.SerializeToString()


def inference_session(onnx_model: bytes | str, intra_op_threads: int = 1):
    """An onnxruntime CPU session; one intra-op thread is fastest for one small observation."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return ort.InferenceSession(onnx_model, sess_options=options, providers=["CPUExecutionProvider"])


def random_observations(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Wide random observations (σ = 3, beyond the scaler's ±5 clip in the tails) to probe the
    graph outside the states the env visits."""
    return rng.normal(0.0, 3.0, size=(n, dim)).astype(np.float32)


def rollout_observations(model: Any, env, max_observations: int) -> np.ndarray:
    """Observations the env produces while the model's deterministic policy drives it."""
    observation, _ = env.reset()
    collected = [observation]
    done = False
    while not done and len(collected) < max_observations:
        action, _ = model.predict(observation, deterministic=True)
        observation, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
        collected.append(observation)
    return np.asarray(collected, dtype=np.float32)


def check_parity(
    model: Any,
    session,
    real_observations: np.ndarray,
    n_observations: int = 1000,
    tolerance: float = 1e-5,
    seed: int = 0,
) -> dict[str, Any]:
    """Max |ONNX - model.predict(deterministic=True)| over real observations topped up with random
    ones to ``n_observations``; raises when it exceeds ``tolerance``."""
    dim = observation_dim(model)
    real = np.asarray(real_observations, dtype=np.float32).reshape(-1, dim)[:n_observations]
    rng = np.random.default_rng(seed)
    observations = np.concatenate([real, random_observations(n_observations - len(real), dim, rng)])
    reference, _ = model.predict(observations, deterministic=True)
    (exported,) = session.run([OUTPUT_NAME], {INPUT_NAME: observations})
    difference = np.abs(exported.astype(np.float64) - np.asarray(reference, dtype=np.float64))
    report = {
        "n_observations": int(len(observations)),
        "n_real": int(len(real)),
        "n_random": int(len(observations) - len(real)),
        "max_abs_diff": float(difference.max()),
        "mean_abs_diff": float(difference.mean()),
        "tolerance": float(tolerance),
    }
    report["passed"] = report["max_abs_diff"] <= tolerance
    if not report["passed"]:
        raise ValueError(
            f"ONNX export differs from the PyTorch policy by {report['max_abs_diff']:.3g} "
            f"(> tolerance {tolerance:g}) on {report['n_observations']} observations"
        )
    return report


def latency_percentiles(call: Callable[[], Any], repeats: int = 1000, warmup: int = 50) -> dict[str, float]:
    """p50 / p95 / p99 / mean wall time of ``call()`` in milliseconds."""
    for _ in range(warmup):
        call()
    timings = np.empty(repeats, dtype=np.float64)
    clock = time.perf_counter_ns
    for i in range(repeats):
        start = clock()
        call()
        timings[i] = clock() - start
    timings /= 1e6
    p50, p95, p99 = np.percentile(timings, [50, 95, 99])
    return {
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "mean_ms": float(timings.mean()),
        "repeats": int(repeats),
    }


def measure_latency(
    model: Any, session, observation: np.ndarray, repeats: int = 1000, warmup: int = 50
) -> dict[str, dict[str, float]]:
    """Latency of one observation through onnxruntime and through ``model.predict`` (the
    in-process PyTorch baseline, with the threads torch is configured for)."""
    single = np.asarray(observation, dtype=np.float32).reshape(1, -1)
    feed = {INPUT_NAME: single}
    return {
        "onnxruntime": latency_percentiles(lambda: session.run([OUTPUT_NAME], feed), repeats, warmup),
        "torch_predict": latency_percentiles(lambda: model.predict(single[0], deterministic=True), repeats, warmup),
    }


def export_versions() -> dict[str, str]:
    import onnx
    import onnxruntime
    import onnxscript

    return {
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "onnxscript": onnxscript.__version__,
    }


@dataclass(frozen=True, kw_only=True)
class ParityParams(Section):
    split: Literal["train", "validation", "test"] = "validation"  # real observations come from this split
    n_observations: int = setting(1000, interval="[1, inf)")  # real ones (at most max_real) + random ones
    max_real: int = setting(500, interval="[0, inf)")
    tolerance: float = setting(1e-5, interval="(0, inf)")  # max |ONNX - model.predict|; larger fails

    def validate(self, prefix: str) -> None:
        require_not_above(self, prefix, "max_real", "n_observations")


@dataclass(frozen=True, kw_only=True)
class LatencyParams(Section):
    repeats: int = setting(1000, interval="[1, inf)")  # single-observation inferences timed (after warmup)
    warmup: int = setting(50, interval="[0, inf)")
    intra_op_threads: int = setting(1, interval="[1, inf)")


@dataclass(frozen=True, kw_only=True)
class ExportParams(Section):
    opset: int = setting(DEFAULT_OPSET, interval="[1, inf)")
    parity: ParityParams = setting(ParityParams())
    latency: LatencyParams = setting(LatencyParams())
    safeguards: SafeguardConfig = setting(SafeguardConfig())


def export_and_verify(model: Any, parity_env, params: ExportParams, seed: int = 0) -> tuple[bytes, dict[str, Any]]:
    """Export ``model``'s actor, check parity on observations of ``parity_env`` (driven by the
    model) plus random ones, and time one inference; returns the ONNX bytes and the report."""
    parity, latency = params.parity, params.latency
    onnx_bytes = export_actor(model, params.opset)
    session = inference_session(onnx_bytes, latency.intra_op_threads)
    real = rollout_observations(model, parity_env, parity.max_real)
    report = {
        "exporter": "torch.onnx.export(dynamo=True)",
        "opset": params.opset,
        "input": {"name": INPUT_NAME, "shape": ["batch", observation_dim(model)], "dtype": "float32"},
        "output": {
            "name": OUTPUT_NAME,
            "shape": ["batch", int(model.policy.action_space.shape[0])],
            "dtype": "float32",
        },
        "onnx_bytes": len(onnx_bytes),
        "parity": check_parity(model, session, real, parity.n_observations, parity.tolerance, seed),
        "latency": {
            **measure_latency(model, session, real[0], latency.repeats, latency.warmup),
            "intra_op_threads": latency.intra_op_threads,
        },
        "versions": export_versions(),
    }
    return onnx_bytes, report
