"""Export trained actors to ONNX and turn live bars into guarded trading signals."""

from trading_rl.export.inference import PortfolioState, Signal, SignalEngine
from trading_rl.export.onnx_export import (
    DeterministicActor,
    check_parity,
    export_actor,
    inference_session,
    latency_percentiles,
    measure_latency,
    rollout_observations,
)
from trading_rl.export.safeguards import SafeguardConfig, Safeguards

__all__ = [
    "DeterministicActor",
    "PortfolioState",
    "SafeguardConfig",
    "Safeguards",
    "Signal",
    "SignalEngine",
    "check_parity",
    "export_actor",
    "inference_session",
    "latency_percentiles",
    "measure_latency",
    "rollout_observations",
]
