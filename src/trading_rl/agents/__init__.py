"""Agents: SAC with an Intrinsic Curiosity Module, its training loop and device selection."""

from trading_rl.agents.device import resolve_device
from trading_rl.agents.icm import ICMConfig, IntrinsicCuriosityModule, MovingAverage
from trading_rl.agents.sac_icm import (
    AgentParams,
    SACWithICM,
    TrainingDivergedError,
    build_agent,
)
from trading_rl.agents.training import TrainingOutcome, train_agent
from trading_rl.agents.training_env import wrap_training_env

__all__ = [
    "AgentParams",
    "ICMConfig",
    "IntrinsicCuriosityModule",
    "MovingAverage",
    "SACWithICM",
    "TrainingDivergedError",
    "TrainingOutcome",
    "build_agent",
    "resolve_device",
    "train_agent",
    "wrap_training_env",
]
