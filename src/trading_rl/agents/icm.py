"""Intrinsic Curiosity Module (Pathak et al., 2017) for continuous actions.

Curiosity rewards transitions the agent cannot yet predict, which keeps a trading agent exploring
instead of settling on one action early (the collapse this project exists to prevent).

- encoder φ: observation -> feature vector (MLP);
- inverse model (φ(s), φ(s')) -> â, trained with MSE against the taken action; it shapes φ to keep
  only what the agent's action influences;
- forward model (φ(s), a) -> φ̂(s'), trained on ``0.5·||φ̂(s') − φ(s')||²``; as in the paper its
  gradient also reaches the encoder through φ(s'), and the inverse loss keeps the features from
  shrinking to nothing (detaching φ(s') instead leaves the forward model chasing moving targets);
- loss ``(1 − β)·L_inv + β·L_fwd``;
- intrinsic reward ``η · 0.5·||φ̂(s') − φ(s')||²`` per sample (no gradient), normalised by running
  mean/std statistics (updated with every batch *before* normalising it, so the first batch is
  already centred) and clipped to ``±reward_clip``.

The running statistics are registered buffers and the optimiser hangs off the module (as SB3 does
with ``actor.optimizer``), so ``state_dict`` + ``optimizer.state_dict`` capture the whole state.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch as th
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class ICMConfig:
    """Curiosity settings; defaults are the seeds' phase A.3 values."""

    eta: float = 0.01
    beta: float = 0.2
    feature_dim: int = 64
    hidden_dim: int = 128
    lr: float = 1e-3
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    train_freq: int = 1
    reward_clip: float = 5.0
    # Rescale the normalised intrinsic reward to the running std of the extrinsic reward before
    # mixing: daily log-return rewards are ~1e-3 while a normalised curiosity reward is ~1, so
    # without it a 0.1 curiosity weight would still drown the P&L signal.
    match_extrinsic_scale: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"icm.beta must be in [0, 1], got {self.beta}")
        for name in ("eta", "lr", "grad_clip", "reward_clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"icm.{name} must be > 0, got {getattr(self, name)}")
        for name in ("feature_dim", "hidden_dim", "train_freq"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"icm.{name} must be a positive integer, got {getattr(self, name)}")

    def as_dict(self) -> dict:
        return asdict(self)


class RunningMeanStd(nn.Module):
    """Mean and variance of every value seen so far, merged batch by batch (Chan et al.'s parallel
    update, as in SB3's numpy ``RunningMeanStd``); kept as buffers so they save with the module."""

    def __init__(self, epsilon: float = 1e-4) -> None:
        super().__init__()
        self.register_buffer("mean", th.zeros((), dtype=th.float64))
        self.register_buffer("var", th.ones((), dtype=th.float64))
        # A tiny prior count avoids dividing by zero before the first batch (SB3 does the same).
        self.register_buffer("count", th.tensor(epsilon, dtype=th.float64))

    @th.no_grad()
    def update(self, values: th.Tensor) -> None:
        x = values.detach().to(th.float64).reshape(-1)
        batch_count = x.numel()
        if batch_count == 0:
            return
        batch_mean = x.mean()
        batch_var = x.var(unbiased=False)
        delta = batch_mean - self.mean
        total = self.count + batch_count
        new_mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta.square() * self.count * batch_count / total
        self.mean.copy_(new_mean)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, values: th.Tensor, epsilon: float = 1e-8) -> th.Tensor:
        scaled = (values.to(th.float64) - self.mean) / th.sqrt(self.var + epsilon)
        return scaled.to(values.dtype)


def _mlp(in_dim: int, hidden_dim: int, out_dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, out_dim))


class IntrinsicCuriosityModule(nn.Module):
    """Encoder, forward and inverse models, reward statistics and their own AdamW optimiser."""

    def __init__(self, obs_dim: int, action_dim: int, config: ICMConfig | None = None) -> None:
        super().__init__()
        self.config = config or ICMConfig()
        c = self.config
        self.encoder = nn.Sequential(
            nn.Linear(obs_dim, c.hidden_dim), nn.ReLU(), nn.Linear(c.hidden_dim, c.feature_dim)
        )
        self.forward_model = _mlp(c.feature_dim + action_dim, c.hidden_dim, c.feature_dim)
        # Actions live in [-1, 1] (SB3 stores squashed actions), hence the tanh head.
        self.inverse_model = nn.Sequential(_mlp(2 * c.feature_dim, c.hidden_dim, action_dim), nn.Tanh())
        self.reward_stats = RunningMeanStd()
        self.extrinsic_stats = RunningMeanStd()
        # The fused kernel makes the step about 3x cheaper on CPU, a visible share of curiosity's cost.
        self.optimizer = th.optim.AdamW(self.parameters(), lr=c.lr, weight_decay=c.weight_decay, fused=True)

    def _prediction_error(
        self, observations: th.Tensor, actions: th.Tensor, next_observations: th.Tensor
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """Per-sample forward error ``0.5·||φ̂(s') − φ(s')||²`` plus the two feature batches."""
        # One encoder pass over both batches: one larger matrix product instead of two.
        both = th.cat([observations.flatten(1), next_observations.flatten(1)]).float()
        phi, phi_next = self.encoder(both).chunk(2)
        predicted_next = self.forward_model(th.cat([phi, actions.flatten(1).float()], dim=1))
        error = 0.5 * (predicted_next - phi_next).square().sum(dim=1)
        return error, phi, phi_next

    @th.no_grad()
    def raw_intrinsic_reward(
        self, observations: th.Tensor, actions: th.Tensor, next_observations: th.Tensor
    ) -> th.Tensor:
        """``η · 0.5·||φ̂(s') − φ(s')||²`` per sample, shape ``(batch,)``, before normalisation."""
        error, _, _ = self._prediction_error(observations, actions, next_observations)
        return self.config.eta * error

    def _normalised(self, raw: th.Tensor) -> th.Tensor:
        self.reward_stats.update(raw)
        clip = self.config.reward_clip
        return self.reward_stats.normalize(raw).clamp(-clip, clip)

    @th.no_grad()
    def intrinsic_reward(
        self, observations: th.Tensor, actions: th.Tensor, next_observations: th.Tensor
    ) -> th.Tensor:
        """Raw reward folded into the running statistics, then normalised and clipped."""
        return self._normalised(self.raw_intrinsic_reward(observations, actions, next_observations))

    def losses(
        self, observations: th.Tensor, actions: th.Tensor, next_observations: th.Tensor
    ) -> dict[str, th.Tensor]:
        """Mean forward, inverse and total loss, plus the per-sample ``forward_error``."""
        error, phi, phi_next = self._prediction_error(observations, actions, next_observations)
        predicted_action = self.inverse_model(th.cat([phi, phi_next], dim=1))
        forward_loss = error.mean()
        inverse_loss = F.mse_loss(predicted_action, actions.flatten(1).float())
        beta = self.config.beta
        total = (1.0 - beta) * inverse_loss + beta * forward_loss
        return {"forward_loss": forward_loss, "inverse_loss": inverse_loss, "total_loss": total, "forward_error": error}

    def _optimise(self, losses: dict[str, th.Tensor]) -> dict[str, float]:
        """One clipped AdamW step on the total loss, skipped when a loss is not finite (the values
        are returned either way so the caller can name the bad one)."""
        names = ("forward_loss", "inverse_loss", "total_loss")
        # One device sync for the three numbers instead of three.
        values = dict(zip(names, th.stack([losses[name].detach() for name in names]).tolist()))
        if all(math.isfinite(value) for value in values.values()):
            self.optimizer.zero_grad()
            losses["total_loss"].backward()
            nn.utils.clip_grad_norm_(self.parameters(), self.config.grad_clip)
            self.optimizer.step()
        return values

    def update(
        self, observations: th.Tensor, actions: th.Tensor, next_observations: th.Tensor
    ) -> dict[str, float]:
        """One optimiser step on a batch; returns forward, inverse and total loss as floats."""
        return self._optimise(self.losses(observations, actions, next_observations))

    def reward_and_update(
        self, observations: th.Tensor, actions: th.Tensor, next_observations: th.Tensor, update: bool = True
    ) -> tuple[th.Tensor, dict[str, float] | None]:
        """``intrinsic_reward`` of the batch under the current weights, then (if ``update``) one
        ``update`` on it — sharing one forward pass, which is what keeps curiosity cheap."""
        if not update:
            return self.intrinsic_reward(observations, actions, next_observations), None
        losses = self.losses(observations, actions, next_observations)
        reward = self._normalised(self.config.eta * losses["forward_error"].detach())
        return reward, self._optimise(losses)
