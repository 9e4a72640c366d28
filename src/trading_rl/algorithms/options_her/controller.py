"""Option controller: state → option logits and option values, masked by the initiation sets.

Trained on option-level returns (the log equity change over the option's whole run) with the seed
``003`` stabilisers: the advantage ``G − V(s)`` is normalised per batch, an entropy bonus keeps all
options in play, the logits are divided by a temperature annealed 1.0 → 0.1 (×0.9995 per update),
the value head is regressed on ``G`` (weight 1.0) and gradients are clipped at 0.5.

``Q(s, o)`` is the value head's estimate of the return of running option ``o`` from ``s``; the state
value used as baseline is its expectation under the current (masked) policy.

Warm start. The option policy starts from its source like the low-level SAC does
(``algorithms.options_her.widening``): ``warm_start_option`` gets ``warm_start_margin`` added to its
policy-head bias, so the untrained controller mostly runs that option and the hierarchy first acts as
the flat policy it was built from. ``scalp`` is the option that passes the low-level action through
unchanged (scale 1, any direction), so with it the warm-started agent trades as its source; the other
options are still sampled (about 20% of starts at margin 3 and temperature 1) and the controller moves
to them where their option returns are higher. A margin of 0 is the seeds' uniform start, whose random
option choices took the source's whole edge before any training (docs/results.md, "The chain on the
controls").
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch as th
from torch import nn

from trading_rl.algorithms.options_her.options import OPTION_NAMES
from trading_rl.config import Section, setting

MASKED_LOGIT = -1e9


@dataclass(frozen=True, kw_only=True)
class ControllerConfig(Section):
    """``options_her.controller`` (seed ``003`` values)."""

    hidden_dim: int = setting(512, interval="[1, inf)")
    dropout: float = setting(0.1, interval="[0, 1)")
    # ``lr`` (not learning_rate): saved controllers store this config by field name.
    lr: float = setting(3e-4, interval="[0, inf)")
    train_freq: int = setting(8, interval="[1, inf)")
    warmup_steps: int = setting(2000, interval="[0, inf)")
    value_loss_weight: float = setting(1.0, interval="[0, inf)")
    grad_clip: float = setting(0.5, interval="(0, inf)")
    normalize_advantages: bool = True
    advantage_epsilon: float = setting(1e-8, interval="(0, inf)")
    entropy_bonus: float = setting(0.01, interval="[0, inf)")
    temperature: float = setting(1.0, interval="(0, inf)")
    temperature_decay: float = setting(0.9995, interval="(0, 1]")
    min_temperature: float = setting(0.1, interval="(0, inf)")
    buffer_size: int = setting(80_000, interval="[1, inf)")
    batch_size: int = setting(128, interval="[1, inf)")
    # Warm start (module docstring): the untrained controller mostly runs the pass-through option, so
    # the hierarchy starts as the sac_icm policy it is built from; margin 0 is the seeds' uniform start.
    warm_start_option: str = setting("scalp", choices=OPTION_NAMES)
    warm_start_margin: float = setting(3.0, interval="[0, inf)")

    @classmethod
    def from_mapping(
        cls, params: Any = None, prefix: str = "options_her.controller", base: ControllerConfig | None = None
    ) -> ControllerConfig:
        return super().from_mapping(params, prefix, base)


class OptionController(nn.Module):
    """Shared MLP trunk with a policy head (logits) and a value head (one value per option)."""

    def __init__(self, state_dim: int, n_options: int, hidden_dim: int = 512, dropout: float = 0.1):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(state_dim, hidden_dim),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, hidden_dim),
            nn.ReLU(),
            nn.Dropout(dropout),
        )
        self.policy_head = nn.Linear(hidden_dim, n_options)
        self.value_head = nn.Linear(hidden_dim, n_options)

    def forward(self, states: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        hidden = self.trunk(states)
        return self.policy_head(hidden), self.value_head(hidden)


def masked_log_probs(logits: th.Tensor, masks: th.Tensor, temperature: float) -> th.Tensor:
    """Log-softmax of ``logits / temperature`` over the allowed options (masked ones get ~-inf)."""
    scaled = logits / max(temperature, 1e-6)
    return th.log_softmax(scaled.masked_fill(~masks, MASKED_LOGIT), dim=-1)


class OptionLearner:
    """Controller, its optimiser, its option-transition buffer (numpy ring) and its temperature."""

    def __init__(self, state_dim: int, n_options: int, config: ControllerConfig, seed: int = 0, device: str = "cpu"):
        self.config = config
        self.state_dim = int(state_dim)
        self.n_options = int(n_options)
        self.device = th.device(device)
        th.manual_seed(seed)
        self.controller = OptionController(state_dim, n_options, config.hidden_dim, config.dropout).to(self.device)
        self.optimizer = th.optim.Adam(self.controller.parameters(), lr=config.lr)
        self.temperature = float(config.temperature)
        self.rng = np.random.default_rng(seed)
        size = int(config.buffer_size)
        self._states = np.zeros((size, state_dim), dtype=np.float32)
        self._masks = np.zeros((size, n_options), dtype=bool)
        self._options = np.zeros(size, dtype=np.int64)
        self._returns = np.zeros(size, dtype=np.float32)
        self._pos = 0
        self._full = False
        self.n_updates = 0
        self._last_train_step = 0

    def prefer(self, option: int, margin: float) -> None:
        """Warm start: raise ``option``'s logit by ``margin`` everywhere (its policy-head bias)."""
        with th.no_grad():
            self.controller.policy_head.bias[option] += margin

    # ---- acting --------------------------------------------------------------------------------
    def probabilities(self, states: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Masked option probabilities at the current temperature, ``(n, n_options)``."""
        self.controller.eval()
        with th.no_grad():
            logits, _ = self.controller(th.as_tensor(np.atleast_2d(states), dtype=th.float32, device=self.device))
            log_probs = masked_log_probs(
                logits, th.as_tensor(np.atleast_2d(masks), device=self.device), self.temperature
            )
        return log_probs.exp().cpu().numpy().astype(np.float64)

    def select(self, states: np.ndarray, masks: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """One option per row among the allowed ones: sampled, or the most likely when deterministic."""
        masks = np.atleast_2d(masks)
        if not masks.any(axis=1).all():
            raise ValueError("every row needs at least one allowed option (the wait option is always allowed)")
        probs = self.probabilities(states, masks) * masks
        if deterministic:
            return probs.argmax(axis=1)
        cumulative = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
        draws = self.rng.random((len(probs), 1))
        return np.minimum((draws > cumulative).sum(axis=1), self.n_options - 1)

    # ---- learning ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._returns) if self._full else self._pos

    def store(self, states: np.ndarray, masks: np.ndarray, options: np.ndarray, returns: np.ndarray) -> None:
        """Add finished options: the state and mask they started from, the option, its return."""
        size = len(self._returns)
        for state, mask, option, ret in zip(np.atleast_2d(states), np.atleast_2d(masks), options, returns):
            self._states[self._pos] = state
            self._masks[self._pos] = mask
            self._options[self._pos] = option
            self._returns[self._pos] = ret
            self._pos = (self._pos + 1) % size
            self._full = self._full or self._pos == 0

    def maybe_train(self, num_timesteps: int) -> dict[str, float] | None:
        """One update every ``train_freq`` env steps once past the warm-up and a full batch."""
        config = self.config
        if num_timesteps < config.warmup_steps or len(self) < config.batch_size:
            return None
        if num_timesteps - self._last_train_step < config.train_freq:
            return None
        self._last_train_step = num_timesteps
        index = self.rng.integers(0, len(self), size=config.batch_size)
        return self.update(self._states[index], self._masks[index], self._options[index], self._returns[index])

    def update(self, states, masks, options, returns) -> dict[str, float]:
        """One gradient step on a batch of option transitions; returns the losses and diagnostics."""
        config = self.config
        self.controller.train()
        states_t = th.as_tensor(states, dtype=th.float32, device=self.device)
        masks_t = th.as_tensor(masks, dtype=th.bool, device=self.device)
        options_t = th.as_tensor(options, dtype=th.int64, device=self.device)
        returns_t = th.as_tensor(returns, dtype=th.float32, device=self.device)

        logits, values = self.controller(states_t)
        log_probs = masked_log_probs(logits, masks_t, self.temperature)
        probs = log_probs.exp()
        chosen_log_probs = log_probs.gather(1, options_t[:, None]).squeeze(1)
        chosen_values = values.gather(1, options_t[:, None]).squeeze(1)
        state_values = (probs * values).sum(dim=1).detach()
        advantages = returns_t - state_values
        if config.normalize_advantages and advantages.numel() > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + config.advantage_epsilon)
        policy_loss = -(chosen_log_probs * advantages).mean()
        value_loss = nn.functional.mse_loss(chosen_values, returns_t)
        entropy = -(probs * log_probs.masked_fill(~masks_t, 0.0)).sum(dim=1).mean()
        loss = policy_loss + config.value_loss_weight * value_loss - config.entropy_bonus * entropy

        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = float(nn.utils.clip_grad_norm_(self.controller.parameters(), config.grad_clip))
        self.optimizer.step()
        self.temperature = max(config.min_temperature, self.temperature * config.temperature_decay)
        self.n_updates += 1
        stats = {
            "policy_loss": float(policy_loss.detach()),
            "value_loss": float(value_loss.detach()),
            "entropy": float(entropy.detach()),
            "grad_norm": grad_norm,
            "temperature": self.temperature,
        }
        bad = [name for name, value in stats.items() if not math.isfinite(value)]
        if bad:
            raise FloatingPointError(f"option controller update produced non-finite {bad} at update {self.n_updates}")
        return stats

    # ---- persistence ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What is needed to act again (weights, temperature, sizes, config); not the buffer."""
        return {
            "state_dim": self.state_dim,
            "n_options": self.n_options,
            "config": asdict(self.config),
            "temperature": self.temperature,
            "n_updates": self.n_updates,
            "weights": copy.deepcopy(self.controller.state_dict()),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], seed: int = 0, device: str = "cpu") -> OptionLearner:
        learner = cls(state["state_dim"], state["n_options"], ControllerConfig(**state["config"]), seed, device)
        learner.controller.load_state_dict(state["weights"])
        learner.temperature = float(state["temperature"])
        learner.n_updates = int(state["n_updates"])
        return learner
