"""Multi-objective reward shaping: five causal objectives, a state-conditioned weight network, a
learned potential Φ with ``F = γΦ(s') − Φ(s)``, and a gymnasium wrapper that applies them."""

from trading_rl.rewards.objectives import OBJECTIVES, ObjectiveParams, ObjectiveTracker, Transitions
from trading_rl.rewards.potential import (
    AdaptiveShapingWeight,
    PotentialNetwork,
    discounted_returns,
    potential_shaping,
    train_potential,
)
from trading_rl.rewards.shaper import RewardShaper, ShapedRewardVecEnv, ShapedRewardWrapper, context_indices
from trading_rl.rewards.weights import (
    ObjectiveWeightNetwork,
    forward_risk_adjusted_return,
    train_weight_network,
    weight_gates,
)

__all__ = [
    "OBJECTIVES",
    "AdaptiveShapingWeight",
    "ObjectiveParams",
    "ObjectiveTracker",
    "ObjectiveWeightNetwork",
    "PotentialNetwork",
    "RewardShaper",
    "ShapedRewardVecEnv",
    "ShapedRewardWrapper",
    "Transitions",
    "context_indices",
    "discounted_returns",
    "forward_risk_adjusted_return",
    "potential_shaping",
    "train_potential",
    "train_weight_network",
    "weight_gates",
]
