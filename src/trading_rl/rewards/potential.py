"""Potential-based reward shaping (Ng, Harada & Russell, 1999).

Adding ``F(s, s') = γ·Φ(s') − Φ(s)`` to every reward leaves the optimal policy unchanged for any
``Φ``: along a trajectory the terms telescope to ``γ^T·Φ(s_T) − Φ(s_0)``, which no action can
change except through where the episode ends, and ``Φ(terminal) = 0`` removes that too. A Φ close
to the value function makes the dense term informative, so Φ is regressed on Monte Carlo returns
of the rollouts. Truncation by a time limit is not a terminal state: there ``γ·Φ(s')`` stays, as
SB3 bootstraps truncated transitions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch as th
from torch import nn

from trading_rl.config import Section, setting
from trading_rl.evaluation.metrics.metrics import sharpe_ratio
from trading_rl.monitoring.actions import action_histogram, histogram_entropy


@dataclass(frozen=True, kw_only=True)
class PotentialParams(Section):
    """``reward_shaper.potential``: the Φ network and its training."""

    hidden_dim: int = setting(128, interval="[1, inf)")
    learning_rate: float = setting(1e-4, interval="(0, inf)")
    epochs: int = setting(20, interval="[1, inf)")
    batch_size: int = setting(256, interval="[1, inf)")


def potential_shaping(phi_s, phi_next, gamma: float, done):
    """``γ·Φ(s')·(1 − done) − Φ(s)``, elementwise; numpy arrays/scalars or torch tensors.

    ``done`` marks terminal next states (``Φ(terminal) = 0``), not time-limit truncations.
    """
    if isinstance(phi_s, th.Tensor) or isinstance(phi_next, th.Tensor):
        phi_next = th.as_tensor(phi_next)
        alive_tensor = 1.0 - th.as_tensor(done, device=phi_next.device).to(phi_next.dtype)
        return gamma * phi_next * alive_tensor - th.as_tensor(phi_s, device=phi_next.device).to(phi_next.dtype)
    alive = 1.0 - np.asarray(done, dtype=np.float64)
    return gamma * np.asarray(phi_next, dtype=np.float64) * alive - np.asarray(phi_s, dtype=np.float64)


def discounted_returns(rewards: np.ndarray, episode_ends: np.ndarray, gamma: float) -> np.ndarray:
    """Monte Carlo return ``G_t = r_t + γ·G_{t+1}`` inside each episode (``episode_ends`` marks the last
    step of every episode: terminal or truncated, the return stops there)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    ends = np.flatnonzero(np.asarray(episode_ends, dtype=bool))
    if ends.size == 0 or ends[-1] != rewards.size - 1:
        ends = np.append(ends, rewards.size - 1)
    # imported here: registering the pipelines (every kedro command) must not pay for it (scipy.stats)
    from scipy.signal import lfilter

    returns = np.empty_like(rewards)
    start = 0
    for end in ends:
        segment = rewards[start : end + 1][::-1]
        returns[start : end + 1] = lfilter([1.0], [1.0, -gamma], segment)[::-1]
        start = int(end) + 1
    return returns


class PotentialNetwork(nn.Module):
    """Φ(context): an MLP on standardised targets, ``Φ = mean + std · net(context)``."""

    target_mean: th.Tensor
    target_std: th.Tensor

    def __init__(self, input_dim: int, hidden_dim: int = 128) -> None:
        super().__init__()
        self.config = {"input_dim": int(input_dim), "hidden_dim": int(hidden_dim)}
        self.body = nn.Sequential(
            nn.Linear(input_dim, hidden_dim),
            nn.ReLU(),
            nn.Linear(hidden_dim, hidden_dim // 2),
            nn.ReLU(),
            nn.Linear(hidden_dim // 2, 1),
        )
        self.register_buffer("target_mean", th.zeros(()))
        self.register_buffer("target_std", th.ones(()))

    @classmethod
    def from_config(cls, config: dict) -> PotentialNetwork:
        return cls(**config)

    def forward(self, context: th.Tensor) -> th.Tensor:
        return self.target_mean + self.target_std * self.body(context).squeeze(-1)


def train_potential(
    contexts: np.ndarray, returns: np.ndarray, params: PotentialParams, seed: int
) -> tuple[PotentialNetwork, list[dict[str, float]]]:
    """Regress Φ on Monte Carlo returns (MSE, Adam); one history row per epoch with the MSE of the
    standardised targets (1.0 = no better than the mean)."""
    p = params
    th.manual_seed(seed)
    generator = np.random.default_rng(seed)
    network = PotentialNetwork(contexts.shape[1], int(p.hidden_dim))
    mean, std = float(np.mean(returns)), float(np.std(returns))
    network.target_mean.fill_(mean)
    network.target_std.fill_(std if std > 1e-12 else 1.0)
    x = th.as_tensor(contexts, dtype=th.float32)
    y = (th.as_tensor(returns, dtype=th.float32) - network.target_mean) / network.target_std
    optimizer = th.optim.Adam(network.body.parameters(), lr=float(p.learning_rate))
    batch = int(p.batch_size)
    history = []
    for epoch in range(int(p.epochs)):
        order = generator.permutation(len(x))
        for start in range(0, len(order), batch):
            rows = th.as_tensor(order[start : start + batch])
            loss = (network.body(x[rows]).squeeze(-1) - y[rows]).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with th.no_grad():
            mse = float((network.body(x).squeeze(-1) - y).square().mean())
        history.append({"epoch": float(epoch + 1), "standardised_mse": mse})
    network.eval()
    return network, history


class AdaptiveShapingWeight:
    """The shaping weight β: up by ``rate`` when the recent action entropy is below ``entropy_low``
    (the agent is collapsing, lean on the dense signal), down by ``rate`` when the recent Sharpe is
    above ``sharpe_high`` (it is doing well, let the true reward speak); clipped to [0, 1]."""

    def __init__(
        self,
        initial: float = 0.1,
        rate: float = 0.01,
        entropy_low: float = 0.3,
        sharpe_high: float = 1.0,
        *,
        hold_threshold: float,
    ) -> None:
        self.value = float(initial)
        self.rate = float(rate)
        self.entropy_low = float(entropy_low)
        self.sharpe_high = float(sharpe_high)
        self.hold_threshold = float(hold_threshold)

    def update(self, actions: np.ndarray, log_returns: np.ndarray, periods_per_year: float) -> dict[str, float]:
        """Adapt on a window of recent raw actions and env log returns; returns what it saw."""
        entropy = histogram_entropy(action_histogram(actions, hold_threshold=self.hold_threshold))
        sharpe = sharpe_ratio(np.expm1(log_returns), periods_per_year)
        if entropy < self.entropy_low:
            self.value = min(1.0, self.value + self.rate)
        elif np.isfinite(sharpe) and sharpe > self.sharpe_high:
            self.value = max(0.0, self.value - self.rate)
        return {"action_entropy": entropy, "sharpe": float(sharpe), "shaping_weight": self.value}
