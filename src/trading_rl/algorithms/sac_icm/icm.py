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
- intrinsic reward ``η · 0.5·||φ̂(s') − φ(s')||²`` per sample (no gradient), normalised per sample as
  ``log(1 + raw / m) / d`` clipped to ``reward_clip``: ``m`` an exponential moving average of the
  batches' median raw reward, ``d`` one of the batches' standard deviation of ``log(1 + raw / m)``
  (both updated with every batch *before* normalising it). It is not centred: a novelty bonus stays a
  bonus (0 for a transition the model predicts perfectly, larger the more surprising).

Why this normalisation: the forward model's error shrinks by orders of magnitude as it learns, and
its distribution is very heavy-tailed (on the default run's trained ICM the largest of 8,000 training
transitions was ~3,000x the median). Against all-time mean/std statistics the bonus became a
near-constant negative number and carried ~2% of the learner reward's variation instead of the
configured 10%; an EMA of the *std* still left it at 2%, because a few huge errors set the scale and
every typical transition's bonus was ~0. Measuring surprise relative to the typical (median) error and
compressing the tail with a log keeps the bonus's spread set by the bulk of the transitions, and the
moving averages follow the falling error, so the bonus keeps its configured share of the variation for
the whole run (``icm/effective_share`` in the training history measures it).

The moving averages are registered buffers and the optimiser hangs off the module (as SB3 does
with ``actor.optimizer``), so ``state_dict`` + ``optimizer.state_dict`` capture the whole state.
"""

from __future__ import annotations

import math

import torch as th
from torch import nn
from torch.nn import functional as F

from trading_rl.training.params import ICMConfig


class MovingAverage(nn.Module):
    """Exponential moving average of one statistic per batch, bias-corrected as Adam's moments are
    (the first batch's value is used as it is, not a twentieth of it); buffers, so it saves with the
    module. ``value`` is 1 before any update.

    ``decay`` may be a tensor of per-member decays: the buffers then have its shape and ``update``
    takes one statistic per member (a population's statistics, ``algorithms.population.stacking``)."""

    average: th.Tensor
    weight: th.Tensor

    def __init__(self, decay: float | th.Tensor) -> None:
        super().__init__()
        self.decay = decay.to(th.float64) if isinstance(decay, th.Tensor) else float(decay)
        shape = self.decay.shape if isinstance(self.decay, th.Tensor) else ()
        self.register_buffer("average", th.zeros(shape, dtype=th.float64))
        self.register_buffer("weight", th.zeros(shape, dtype=th.float64))

    @th.no_grad()
    def update(self, statistic: th.Tensor) -> None:
        self.average.mul_(self.decay).add_((1.0 - self.decay) * statistic.detach().to(th.float64))
        self.weight.mul_(self.decay).add_(1.0 - self.decay)

    @property
    def value(self) -> th.Tensor:
        return th.where(self.weight == 0.0, th.ones_like(self.average), self.average / self.weight)


def _compressed(raw: th.Tensor, median: th.Tensor) -> th.Tensor:
    return th.log1p(raw.to(th.float64) / (median[..., None] + 1e-12))


def _row_std(values: th.Tensor) -> th.Tensor:
    """Population standard deviation over the last axis, each row on its own: torch rounds the std
    of an ``[M, batch]`` tensor's rows differently from a lone row's (a whole-tensor reduction), so a
    population member's spread, and its training, would depend on how many curious members share its
    population. One row (``SACWithICM``'s batch) is torch's own ``std``."""
    rows = values.reshape(-1, values.shape[-1])
    return th.stack([row.std(unbiased=False) for row in rows]).reshape(values.shape[:-1])


def normalised_surprise(
    raw: th.Tensor, median: MovingAverage, spread: MovingAverage, reward_clip: float | th.Tensor, update: bool
) -> th.Tensor:
    """``log(1 + raw / median) / spread`` clipped to ``reward_clip``, per sample of ``raw``
    (``[..., batch]``; the statistics have the leading shape: scalars, or one per population
    member). With ``update``, the batch's median and then its spread are folded in first."""
    if update and raw.shape[-1] >= 2:
        detached = raw.detach()
        median.update(detached.median(dim=-1).values)
        spread.update(_row_std(_compressed(detached, median.value)))
    scaled = _compressed(raw, median.value) / (spread.value[..., None] + 1e-8)
    return scaled.clamp(max=reward_clip).to(raw.dtype)


def curiosity_loss(forward_loss: th.Tensor, inverse_loss: th.Tensor, beta: float | th.Tensor) -> th.Tensor:
    """The ICM's training loss ``(1 − β)·L_inv + β·L_fwd``."""
    return (1.0 - beta) * inverse_loss + beta * forward_loss


# Buffers of the normalisations models were saved with before this one.
_LEGACY_STATISTICS = ("reward_stats.", "extrinsic_stats.", "intrinsic_scale.")


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
        self.intrinsic_median = MovingAverage(c.scale_decay)  # typical raw reward: the surprise unit
        self.intrinsic_spread = MovingAverage(c.scale_decay)  # std of log(1 + raw / median)
        self.extrinsic_scale = MovingAverage(c.scale_decay)  # std of the learner's P&L reward
        # The fused kernel makes the step about 3x cheaper on CPU, a visible share of curiosity's cost.
        self.optimizer = th.optim.AdamW(self.parameters(), lr=c.lr, weight_decay=c.weight_decay, fused=True)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Also loads models saved with earlier reward statistics (all-time mean/std, or moving
        variances): the network weights come back, the normalisation restarts from the next batch."""
        state = {key: value for key, value in state_dict.items() if not key.startswith(_LEGACY_STATISTICS)}
        if len(state) < len(state_dict):
            for name, value in self.state_dict().items():
                if name.startswith(("intrinsic_", "extrinsic_scale.")):
                    state.setdefault(name, value)
        return super().load_state_dict(state, strict=strict, assign=assign)

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

    def normalise(self, raw: th.Tensor) -> th.Tensor:
        """``log(1 + raw / median) / spread`` clipped to ``reward_clip``; no statistics updated."""
        return normalised_surprise(raw, self.intrinsic_median, self.intrinsic_spread, self.config.reward_clip, False)

    def _normalised(self, raw: th.Tensor) -> th.Tensor:
        return normalised_surprise(raw, self.intrinsic_median, self.intrinsic_spread, self.config.reward_clip, True)

    @th.no_grad()
    def intrinsic_reward(self, observations: th.Tensor, actions: th.Tensor, next_observations: th.Tensor) -> th.Tensor:
        """Raw reward folded into the moving statistics, then normalised and clipped."""
        return self._normalised(self.raw_intrinsic_reward(observations, actions, next_observations))

    def forward(
        self, observations: th.Tensor, actions: th.Tensor, next_observations: th.Tensor
    ) -> tuple[th.Tensor, th.Tensor]:
        """Per-sample forward error and the mean inverse loss, what the losses and the reward are
        made of (a population ``vmap``s this over its members' stacked weights)."""
        error, phi, phi_next = self._prediction_error(observations, actions, next_observations)
        predicted_action = self.inverse_model(th.cat([phi, phi_next], dim=1))
        return error, F.mse_loss(predicted_action, actions.flatten(1).float())

    def losses(self, observations: th.Tensor, actions: th.Tensor, next_observations: th.Tensor) -> dict[str, th.Tensor]:
        """Mean forward, inverse and total loss, plus the per-sample ``forward_error``."""
        error, inverse_loss = self(observations, actions, next_observations)
        forward_loss = error.mean()
        total = curiosity_loss(forward_loss, inverse_loss, self.config.beta)
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

    def update(self, observations: th.Tensor, actions: th.Tensor, next_observations: th.Tensor) -> dict[str, float]:
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
