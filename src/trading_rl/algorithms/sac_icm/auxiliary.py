"""Auxiliary prediction heads on the SAC agent's market encoder (docs/algorithms.md, "Auxiliary prediction heads").

A daily P&L reward is a sparse, noisy training signal for the networks that read the market. Dense
supervised targets give that encoder something to learn from on every replayed transition:

- ``next_return``: the next bar's log close-to-close return (standardised; mean squared error);
- ``volatility``: log realised volatility of the next ``volatility_horizon`` bars' returns
  (standardised; mean squared error);
- ``volume``: the next bar's volume class, low / normal / high, from its volume relative to the
  mean of the ``volume_window`` bars before it, with the class thresholds at ``volume_quantiles`` of
  the training bars (cross-entropy);
- ``regime``: the causal regime label of the decision bar (``evaluation.validation.regimes.label_regimes``,
  closes up to that bar; cross-entropy). The observation holds ``window_size`` bars; the label
  summarises hundreds, so predicting it asks the encoder for the longer context.

No behaviour-cloning head: there is no teacher policy worth imitating here.

Leakage rules: targets are labels only. ``AuxiliaryTargets`` computes them from the bars of the env
it wraps (the training env: training bars only; a target that would need a bar past the env's last
one is missing, never filled from later data) and hands them out in ``info``, which the policy never
reads; ``AuxiliaryReplayBuffer`` stores them next to each transition, so every label belongs to the
env the transition came from even after ``set_env`` to another walk-forward window.

Network choice: ``MarketEncoder`` is an SB3 features extractor shared by actor and critic
(``share_features_extractor=True``). It encodes the observation's feature window into a latent and
passes the portfolio state through untouched. As SB3 does for shared extractors, the actor loss
trains it and the critic reads it without back-propagating; the auxiliary heads add their loss on
it through their own optimiser. Heads are linear, so the encoder has to carry the information.
"""

from __future__ import annotations

import logging
import math
from typing import Any, cast

import gymnasium as gym
import numpy as np
import pandas as pd
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn
from torch.nn import functional as F

from trading_rl.envs.continuous import trading_env
from trading_rl.envs.layout import STATE_FIELDS
from trading_rl.evaluation.validation.regimes import REGIMES, bar_regimes
from trading_rl.training.params import HEADS, AuxiliaryConfig

logger = logging.getLogger(__name__)

PARAMS_PREFIX = "sac_icm.agent.auxiliary"
VOLUME_CLASSES: tuple[str, ...] = ("low", "normal", "high")
REGRESSION_HEADS = ("next_return", "volatility")
HEAD_OUTPUTS = {"next_return": 1, "volatility": 1, "volume": len(VOLUME_CLASSES), "regime": len(REGIMES)}
TARGETS_INFO_KEY = "aux_targets"


# ---------------------------------------------------------------- targets


def _standardised(values: np.ndarray) -> np.ndarray:
    finite = values[np.isfinite(values)]
    if finite.size < 2 or finite.std() == 0.0:
        return np.full_like(values, np.nan)
    return (values - finite.mean()) / finite.std()


def target_table(env: gym.Env, config: AuxiliaryConfig) -> np.ndarray:
    """Targets of every bar ``t`` of a trading env, shape ``(n_bars, len(HEADS))``, NaN where missing.

    Row ``t`` labels the observation at bar ``t``: ``next_return`` and ``volume`` need bar ``t + 1``,
    ``volatility`` bars ``t + 1 .. t + volatility_horizon``; they are missing where the env's bars end.
    Means, deviations and volume thresholds are those of the env's own bars (the training bars).
    """
    base = trading_env(env, "auxiliary targets")
    close = base.close_prices
    n = len(close)
    returns = np.full(n, np.nan)
    returns[:-1] = np.diff(np.log(close))  # returns[t]: bar t to bar t + 1
    horizon = config.volatility_horizon
    forward_vol = pd.Series(returns).rolling(horizon).std(ddof=0).shift(-(horizon - 1)).to_numpy()
    with np.errstate(divide="ignore"):
        log_vol = np.where(forward_vol > 0, np.log(np.where(forward_vol > 0, forward_vol, 1.0)), np.nan)

    table = np.full((n, len(HEADS)), np.nan, dtype=np.float64)
    table[:, HEADS.index("next_return")] = _standardised(returns)
    table[:, HEADS.index("volatility")] = _standardised(log_vol)

    volumes = getattr(base, "volumes", None)
    if volumes is None:
        if config.weights["volume"] > 0:
            raise ValueError(f"the training prices have no 'volume' column: set '{PARAMS_PREFIX}.weights.volume' to 0")
    else:
        series = pd.Series(np.where(volumes > 0, volumes, np.nan))
        relative = (series / series.shift(1).rolling(config.volume_window).mean()).to_numpy()
        finite = relative[np.isfinite(relative)]
        if finite.size:
            low, high = np.quantile(finite, config.volume_quantiles)
            classes = np.where(np.isfinite(relative), np.digitize(relative, [low, high]), np.nan)
            table[:-1, HEADS.index("volume")] = classes[1:]  # the next bar's class

    regime_of = {name: float(i) for i, name in enumerate(REGIMES)}
    labels = bar_regimes(base.close_history, base.history_positions, config.regimes)
    table[:, HEADS.index("regime")] = [regime_of.get(label, np.nan) for label in labels]
    return table.astype(np.float32)


class AuxiliaryTargets(gym.Wrapper):
    """Adds ``info["aux_targets"]``: the targets of the observation the step's action was decided on.

    The observation is left exactly as the wrapped env made it.
    """

    def __init__(self, env: gym.Env, config: AuxiliaryConfig) -> None:
        super().__init__(env)
        trading_env(env, "auxiliary targets")
        self.table = target_table(env, config)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, TARGETS_INFO_KEY: self.table[info["bar_index"] - 1]}


class AuxiliaryReplayBuffer(ReplayBuffer):
    """SB3's replay buffer plus each transition's auxiliary targets (NaN where the env gave none)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.aux_targets = np.full((self.buffer_size, self.n_envs, len(HEADS)), np.nan, dtype=np.float32)
        self.unlabelled_transitions = 0

    def add(self, obs, next_obs, action, reward, done, infos) -> None:
        for env_index, info in enumerate(infos):
            targets = info.get(TARGETS_INFO_KEY)
            if targets is None:
                if self.unlabelled_transitions == 0:
                    logger.warning(
                        "the training env gives no auxiliary targets (info['%s']); the auxiliary heads learn "
                        "from labelled transitions only. Wrap the env with "
                        "trading_rl.algorithms.sac_icm.training_env.wrap_training_env",
                        TARGETS_INFO_KEY,
                    )
                self.unlabelled_transitions += 1
                self.aux_targets[self.pos, env_index] = np.nan
            else:
                self.aux_targets[self.pos, env_index] = targets
        super().add(obs, next_obs, action, reward, done, infos)

    def sample_labelled(self, batch_size: int) -> tuple[th.Tensor, th.Tensor]:
        """Observations and their targets for ``batch_size`` random stored transitions."""
        upper = self.buffer_size if self.full else self.pos
        batch = np.random.randint(0, upper, size=batch_size)
        envs = np.random.randint(0, self.n_envs, size=batch_size)
        return self.to_torch(self.observations[batch, envs, :]), self.to_torch(self.aux_targets[batch, envs, :])


# ---------------------------------------------------------------- networks


class MarketEncoder(BaseFeaturesExtractor):
    """Observation ``[feature window | portfolio state]`` -> ``[latent(feature window) | state]``."""

    def __init__(self, observation_space: gym.spaces.Box, market_dim: int, latent_dim: int = 64, hidden_dim: int = 128):
        state_dim = int(np.prod(observation_space.shape)) - int(market_dim)
        if state_dim != len(STATE_FIELDS):
            raise ValueError(
                f"the market encoder expects {len(STATE_FIELDS)} portfolio-state values after a {market_dim}-value "
                f"feature window; the observation has {int(np.prod(observation_space.shape))} values"
            )
        super().__init__(observation_space, features_dim=int(latent_dim) + state_dim)
        self.market_dim = int(market_dim)
        self.latent_dim = int(latent_dim)
        self.market = nn.Sequential(
            nn.Linear(self.market_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, self.latent_dim), nn.ReLU()
        )

    def encode_market(self, observations: th.Tensor) -> th.Tensor:
        return self.market(observations[:, : self.market_dim])

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return th.cat([self.encode_market(observations), observations[:, self.market_dim :]], dim=1)


class AuxiliaryHeads(nn.Module):
    """Linear heads on the encoder's latent, and an Adam optimiser over heads *and* encoder.

    The encoder is not a submodule (it belongs to the policy and is saved with it); ``attach`` builds
    the optimiser over both, so ``state_dict`` + ``optimizer.state_dict`` are this object's own state.
    """

    def __init__(self, latent_dim: int, config: AuxiliaryConfig) -> None:
        super().__init__()
        self.config = config
        self.heads = nn.ModuleDict(
            {head: nn.Linear(latent_dim, HEAD_OUTPUTS[head]) for head in HEADS if config.weights[head] > 0}
        )
        self.optimizer: th.optim.Optimizer | None = None

    def attach(self, encoder: MarketEncoder) -> None:
        self.optimizer = th.optim.Adam([*encoder.parameters(), *self.parameters()], lr=self.config.lr)

    def losses(self, latent: th.Tensor, targets: th.Tensor) -> dict[str, th.Tensor]:
        """Loss per head over the samples that have its target (heads without any are left out)."""
        out = {}
        for head, layer in self.heads.items():
            target = targets[:, HEADS.index(head)]
            known = th.isfinite(target)
            if not bool(known.any()):
                continue
            prediction = layer(latent[known])
            if head in REGRESSION_HEADS:
                out[head] = F.mse_loss(prediction.squeeze(1), target[known])
            else:
                out[head] = F.cross_entropy(prediction, target[known].long())
        return out

    def update(self, encoder: MarketEncoder, observations: th.Tensor, targets: th.Tensor) -> dict[str, float]:
        """One clipped step on the weighted sum of the head losses; returns each loss and the total."""
        assert self.optimizer is not None, "attach() the encoder first"
        losses = self.losses(encoder.encode_market(observations.float()), targets)
        if not losses:
            return {}
        # ``losses`` is not empty, so the sum is a tensor, not the start value 0.
        total = cast(th.Tensor, sum(self.config.weights[head] * loss for head, loss in losses.items()))
        values = dict(zip([*losses, "total"], th.stack([*losses.values(), total]).detach().tolist()))
        if all(math.isfinite(value) for value in values.values()):
            self.optimizer.zero_grad()
            total.backward()
            nn.utils.clip_grad_norm_(
                [p for group in self.optimizer.param_groups for p in group["params"]], self.config.grad_clip
            )
            self.optimizer.step()
        return values

    def train_on(
        self, encoder: MarketEncoder, buffer: AuxiliaryReplayBuffer, gradient_steps: int, batch_size: int
    ) -> dict[str, float]:
        """``gradient_steps`` updates on labelled batches from ``buffer``; mean losses as ``aux/<head>_loss``."""
        sums: dict[str, float] = {}
        for _ in range(gradient_steps):
            for name, value in self.update(encoder, *buffer.sample_labelled(batch_size)).items():
                sums[name] = sums.get(name, 0.0) + value
        return {f"aux/{name}_loss": total / gradient_steps for name, total in sums.items()}


# ---------------------------------------------------------------- agent wiring


def auxiliary_agent_kwargs(env: gym.Env, config: AuxiliaryConfig, sac_kwargs: dict[str, Any]) -> dict[str, Any]:
    """SAC keyword arguments with the shared ``MarketEncoder`` and the labelled replay buffer."""
    layout = trading_env(env, "the auxiliary encoder").layout
    policy_kwargs = {
        **sac_kwargs.get("policy_kwargs", {}),
        "features_extractor_class": MarketEncoder,
        "features_extractor_kwargs": {
            "market_dim": layout["features"].stop,
            "latent_dim": config.latent_dim,
            "hidden_dim": config.hidden_dim,
        },
        "share_features_extractor": True,
    }
    return {**sac_kwargs, "policy_kwargs": policy_kwargs, "replay_buffer_class": AuxiliaryReplayBuffer}


def policy_encoder(policy) -> MarketEncoder:
    """The policy's shared market encoder; an error names the clash when another extractor replaced it."""
    encoder = policy.actor.features_extractor
    if not isinstance(encoder, MarketEncoder):
        raise ValueError(
            f"'{PARAMS_PREFIX}' needs the MarketEncoder features extractor, but the policy has "
            f"{type(encoder).__name__} (e.g. multi_symbol's shared encoder): switch one of them off"
        )
    return encoder
