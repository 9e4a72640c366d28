"""State-conditioned objective weights: a softmax over the five objectives, trained on rollouts.

Training objective (documented in ``docs/reward_shaper.md``): the weighted sum of the scaled
objective values ``Σ w_i(s)·c_i / scale_i`` of a transition should *predict the forward
risk-adjusted return* from that state — the sum of the env's log returns over the next ``horizon``
steps of the episode divided by their standard deviation × √n — so the loss is minus their Pearson
correlation over a batch. A balance regulariser ``balance_coef · KL(prior ‖ w(s))`` keeps every
state's weights near the initial 0.40/0.25/0.15/0.10/0.10, which is what the gates ask for: no weight
above 0.6, weight entropy above 0.5 nats, and mean weights that vary by less than 10% over the last
updates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch as th
from torch import nn

from trading_rl.config import ConfigError, Section, setting
from trading_rl.rewards.objectives import OBJECTIVES


@dataclass(frozen=True, kw_only=True)
class InitialWeights(Section):
    """The prior weight of each objective (``OBJECTIVES``): positive, summing to 1."""

    profit: float = 0.40
    risk: float = 0.25
    activity: float = 0.15
    timing: float = 0.10
    exploration: float = 0.10

    def validate(self, prefix: str) -> None:
        vector = self.vector()
        if (vector <= 0).any() or not math.isclose(vector.sum(), 1.0, abs_tol=1e-6):
            raise ConfigError(
                f"parameter '{prefix}': initial_weights must be positive and sum to 1, got {self.to_dict()}"
            )

    def vector(self) -> np.ndarray:
        """The weights in ``OBJECTIVES`` order."""
        return np.array([float(getattr(self, name)) for name in OBJECTIVES])


@dataclass(frozen=True, kw_only=True)
class WeightNetworkParams(Section):
    """``reward_shaper.weight_network``: the prior and how the network is trained."""

    initial_weights: InitialWeights = setting(InitialWeights())
    hidden_dim: int = setting(128, interval="[1, inf)")
    learning_rate: float = setting(1e-4, interval="(0, inf)")
    epochs: int = setting(20, interval="[1, inf)")
    batch_size: int = setting(256, interval="[1, inf)")
    horizon: int = setting(20, interval="[1, inf)")  # forward risk-adjusted return over the next 20 steps
    balance_coef: float = setting(5.0, interval="[0, inf)")  # weight of KL(prior || w(s))


@dataclass(frozen=True, kw_only=True)
class WeightGateParams(Section):
    """``reward_shaper.gates``: the weight gates, and whether a failed gate fails the run."""

    max_weight: float = 0.6
    min_entropy: float = 0.5
    max_variation: float = 0.10
    last_updates: int = 5
    fail_on_gate: bool = False


class ObjectiveWeightNetwork(nn.Module):
    """``context -> softmax`` over ``OBJECTIVES``; at initialisation it outputs the prior exactly
    (zero last layer, bias = log prior). ``component_scale`` (fitted on rollouts) divides the raw
    objective values so the weights compare like with like."""

    prior: th.Tensor
    component_scale: th.Tensor

    def __init__(self, input_dim: int, hidden_dim: int = 128, initial_weights: list[float] | None = None) -> None:
        super().__init__()
        prior = InitialWeights().vector() if initial_weights is None else np.asarray(initial_weights, dtype=np.float64)
        self.config = {"input_dim": int(input_dim), "hidden_dim": int(hidden_dim), "initial_weights": prior.tolist()}
        head = nn.Linear(hidden_dim // 4, len(OBJECTIVES))
        self.body = nn.Sequential(
            nn.Linear(input_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim // 4), nn.ReLU(), head
        )
        with th.no_grad():
            head.weight.zero_()
            head.bias.copy_(th.as_tensor(np.log(prior), dtype=th.float32))
        self.register_buffer("prior", th.as_tensor(prior, dtype=th.float32))
        self.register_buffer("component_scale", th.ones(len(OBJECTIVES)))

    @classmethod
    def from_config(cls, config: dict) -> ObjectiveWeightNetwork:
        return cls(**config)

    def forward(self, context: th.Tensor) -> th.Tensor:
        return th.softmax(self.body(context), dim=-1)


def forward_risk_adjusted_return(rewards: np.ndarray, episodes: np.ndarray, horizon: int) -> np.ndarray:
    """Per step: sum of the env rewards of this and the next ``horizon − 1`` steps of the same episode,
    over their standard deviation × √n (0 where fewer than two steps remain or they are constant)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    target = np.zeros_like(rewards)
    for episode in np.unique(episodes):
        rows = np.flatnonzero(episodes == episode)
        r = rewards[rows]
        padded = np.concatenate([r, np.full(horizon - 1, np.nan)])
        windows = np.lib.stride_tricks.sliding_window_view(padded, horizon)
        present = ~np.isnan(windows)
        counts = present.sum(axis=1)
        values = np.where(present, windows, 0.0)
        sums = values.sum(axis=1)
        deviations = np.where(present, windows - (sums / counts)[:, None], 0.0)
        std = np.sqrt(np.square(deviations).sum(axis=1) / np.maximum(counts - 1, 1))
        with np.errstate(invalid="ignore", divide="ignore"):
            value = sums / (std * np.sqrt(counts))
        target[rows] = np.where((counts >= 2) & (std > 0), value, 0.0)
    return target


def weight_gates(weights: np.ndarray, mean_history: list[list[float]], gates: WeightGateParams) -> list[dict]:
    """The weight gates (docs/reward_shaper.md, "Weight network") on the weights of the rollout
    states ``(n, 5)`` and the history of mean weights per update: max weight, mean entropy (nats),
    relative variation of the mean weights over the last ``last_updates`` updates
    (``(max − min) / mean``, worst objective)."""
    g = gates
    weights = np.asarray(weights, dtype=np.float64)
    entropy = float(np.mean(-np.sum(weights * np.log(np.clip(weights, 1e-12, None)), axis=1)))
    recent = np.asarray(mean_history[-int(g.last_updates) :], dtype=np.float64)
    variation = (
        float(np.max((recent.max(axis=0) - recent.min(axis=0)) / recent.mean(axis=0))) if len(recent) else math.nan
    )
    max_weight = float(weights.max())
    return [
        {
            "gate": "max_weight",
            "value": max_weight,
            "threshold": f"<= {g.max_weight}",
            "passed": max_weight <= g.max_weight,
        },
        {
            "gate": "weight_entropy",
            "value": entropy,
            "threshold": f"> {g.min_entropy}",
            "passed": entropy > g.min_entropy,
        },
        {
            "gate": "weight_stability",
            "value": variation,
            "threshold": f"< {g.max_variation}",
            "passed": bool(math.isfinite(variation) and variation < g.max_variation),
        },
    ]


def train_weight_network(
    contexts: np.ndarray,
    components: np.ndarray,
    target: np.ndarray,
    params: WeightNetworkParams,
    seed: int,
) -> tuple[ObjectiveWeightNetwork, list[dict[str, float]]]:
    """Fit the network on rollout rows; returns it and one history row per epoch (loss, correlation,
    KL to the prior, mean weight per objective)."""
    p = params
    th.manual_seed(seed)
    generator = np.random.default_rng(seed)
    prior = params.initial_weights.vector()
    network = ObjectiveWeightNetwork(contexts.shape[1], int(p.hidden_dim), prior.tolist())
    scale = np.sqrt(np.mean(np.square(components), axis=0))
    scale = np.where(scale > 1e-12, scale, 1.0)
    network.component_scale.copy_(th.as_tensor(scale, dtype=th.float32))

    x = th.as_tensor(contexts, dtype=th.float32)
    c = th.as_tensor(components / scale, dtype=th.float32)
    y = th.as_tensor(target, dtype=th.float32)
    optimizer = th.optim.Adam(network.parameters(), lr=float(p.learning_rate))
    batch = int(p.batch_size)
    history: list[dict[str, float]] = []
    for epoch in range(int(p.epochs)):
        order = generator.permutation(len(x))
        for start in range(0, len(order), batch):
            rows = th.as_tensor(order[start : start + batch])
            if rows.numel() < 2:
                continue
            weights = network(x[rows])
            predicted = (weights * c[rows]).sum(dim=1)
            correlation = _pearson(predicted, y[rows])
            kl = (network.prior * (th.log(network.prior) - th.log(weights.clamp_min(1e-12)))).sum(dim=1).mean()
            loss = -correlation + float(p.balance_coef) * kl
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with th.no_grad():
            weights = network(x)
            predicted = (weights * c).sum(dim=1)
            kl = (network.prior * (th.log(network.prior) - th.log(weights.clamp_min(1e-12)))).sum(dim=1).mean()
            row = {"epoch": float(epoch + 1), "correlation": float(_pearson(predicted, y)), "kl_to_prior": float(kl)}
            row.update({f"weight_{name}": float(v) for name, v in zip(OBJECTIVES, weights.mean(dim=0).tolist())})
        history.append(row)
    network.eval()
    return network, history


def _pearson(a: th.Tensor, b: th.Tensor) -> th.Tensor:
    a = a - a.mean()
    b = b - b.mean()
    return (a * b).sum() / (a.norm() * b.norm()).clamp_min(1e-12)
