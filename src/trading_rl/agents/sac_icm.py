"""SB3 SAC with an Intrinsic Curiosity Module, reusing SB3's own SAC update.

The hook is the replay-buffer sample: during ``train`` the buffer is wrapped so every sampled batch
(1) gets an intrinsic reward from the ICM, (2) trains the ICM on that same batch and (3) after a
warm-up carries ``extrinsic_weight·r_ext + intrinsic_weight·r_int`` as its reward. Everything
curiosity needs happens batched on the learner side; nothing runs per env step, which keeps the env
loop as fast as plain SAC's. With the ICM switched off the class *is* plain SAC (same numbers for
the same seed) plus the divergence guard.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch as th
from stable_baselines3 import SAC
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from torch import nn

from trading_rl.agents.auxiliary import (
    DEFAULT_AUXILIARY_PARAMS,
    AuxiliaryConfig,
    AuxiliaryHeads,
    auxiliary_agent_kwargs,
    policy_encoder,
)
from trading_rl.agents.device import resolve_device
from trading_rl.agents.icm import ICMConfig, IntrinsicCuriosityModule
from trading_rl.agents.training_env import wrap_training_env
from trading_rl.envs.curriculum import DEFAULT_CURRICULUM_PARAMS, resolve_curriculum_params
from trading_rl.monitoring.collapse import DEFAULT_THRESHOLDS

PARAMS_PREFIX = "sac_icm"

# The full parameter schema of the sac_icm phase (defaults from the seeds' phase A.2/A.3 template).
# Every section is validated here, in one place, so a typo anywhere fails before training starts.
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "sac": {
        "learning_rate": 3e-4,
        "buffer_size": 100_000,
        "learning_starts": 1000,
        "batch_size": 256,
        "tau": 0.005,
        "gamma": 0.99,
        "train_freq": 1,
        "gradient_steps": 1,
        "ent_coef": "auto",
        "target_entropy": "auto",
        "target_update_interval": 1,
    },
    "policy": {"net_arch": [256, 256, 128], "activation": "relu"},
    # The learner's view of the P&L reward: daily log returns of a position capped at 15% of equity
    # are ~1e-4, so small that SAC's entropy term swamps them and the policy mean sits in the hold
    # zone. Scaling (SAC paper's "reward scale") changes what the critic sees, not the env's reward.
    "reward": {"scale": 1.0},
    "icm": {
        "enabled": True,
        "eta": 0.01,
        "beta": 0.2,
        "extrinsic_weight": 0.9,
        "intrinsic_weight": 0.1,
        "warmup_steps": 1000,
        "feature_dim": 64,
        "hidden_dim": 128,
        "lr": 1e-3,
        "weight_decay": 1e-4,
        "grad_clip": 1.0,
        "train_freq": 1,
        "reward_clip": 5.0,
        "match_extrinsic_scale": True,
    },
    "training": {
        "total_timesteps": 100_000,
        "eval_freq": 5000,
        "eval_episodes": 1,
        "resume_every": 10_000,
        "log_interval": 10,
        "best_metric": "sharpe",
    },
    "collapse": {
        **DEFAULT_THRESHOLDS,
        "hold_threshold": 0.1,
        "window": 1000,
        "check_freq": 1000,
        "fail_on_collapse": False,
    },
    # Phase E, both off by default (docs/algorithms.md): heads on a shared market encoder, and a
    # curriculum over the training bars.
    "auxiliary": DEFAULT_AUXILIARY_PARAMS,
    "curriculum": DEFAULT_CURRICULUM_PARAMS,
}

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "leaky_relu": nn.LeakyReLU,
    "gelu": nn.GELU,
}

# Losses SB3's SAC.train records (means over the gradient steps of one call).
_SAC_LOSS_KEYS = ("actor_loss", "critic_loss", "ent_coef_loss", "ent_coef")
_ICM_LOSS_KEYS = ("forward_loss", "inverse_loss", "total_loss")


class TrainingDivergedError(RuntimeError):
    """A loss became NaN/inf: the weights are no longer trustworthy."""


def resolve_params(params: dict | None) -> dict[str, dict[str, Any]]:
    """Defaults overlaid with ``params``; an unknown section or key raises ``ValueError`` naming it."""
    params = params or {}
    resolved = copy.deepcopy(DEFAULT_PARAMS)
    for section, values in params.items():
        if section not in DEFAULT_PARAMS:
            raise ValueError(
                f"unknown parameter '{PARAMS_PREFIX}.{section}'; expected one of {sorted(DEFAULT_PARAMS)}"
            )
        if not isinstance(values, dict):
            raise ValueError(f"parameter '{PARAMS_PREFIX}.{section}' must be a mapping, got {values!r}")
        for key, value in values.items():
            if key not in DEFAULT_PARAMS[section]:
                raise ValueError(
                    f"unknown parameter '{PARAMS_PREFIX}.{section}.{key}'; "
                    f"expected one of {sorted(DEFAULT_PARAMS[section])}"
                )
            resolved[section][key] = value
    activation = resolved["policy"]["activation"]
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"parameter '{PARAMS_PREFIX}.policy.activation' must be one of {sorted(ACTIVATIONS)}, got {activation!r}"
        )
    AuxiliaryConfig.from_params(resolved["auxiliary"])
    resolve_curriculum_params(resolved["curriculum"])
    return resolved


class _CuriousSampler:
    """Stands in for the replay buffer inside ``SAC.train``: samples from the real buffer and passes
    the batch through the agent's curiosity step."""

    def __init__(self, buffer, agent: SACWithICM) -> None:
        self._buffer = buffer
        self._agent = agent

    def sample(self, batch_size: int, env=None) -> ReplayBufferSamples:
        return self._agent.learner_batch(self._buffer.sample(batch_size, env=env))


class SACWithICM(SAC):
    """SAC whose sampled rewards include ICM curiosity after ``icm_warmup_steps`` env steps.

    ``icm=None`` switches curiosity off (plain SAC). Any non-finite actor, critic, entropy or ICM
    loss raises ``TrainingDivergedError`` naming the loss and the timestep.
    """

    def __init__(
        self,
        policy,
        env,
        *args,
        icm: ICMConfig | None = None,
        extrinsic_weight: float = 0.9,
        intrinsic_weight: float = 0.1,
        icm_warmup_steps: int = 1000,
        reward_scale: float = 1.0,
        auxiliary: AuxiliaryConfig | None = None,
        **kwargs,
    ) -> None:
        # Set before SAC.__init__, which builds the model (and so the ICM) through _setup_model.
        self.icm_config = icm
        self.auxiliary_config = auxiliary
        self.extrinsic_weight = float(extrinsic_weight)
        self.intrinsic_weight = float(intrinsic_weight)
        self.icm_warmup_steps = int(icm_warmup_steps)
        if not reward_scale > 0:
            raise ValueError(f"parameter 'sac_icm.reward.scale' must be > 0, got {reward_scale}")
        self.reward_scale = float(reward_scale)
        # Batches seen by the ICM; a plain int (saved with the model) so ``icm.train_freq`` survives
        # save/load without a device round trip per batch.
        self.icm_batches = 0
        super().__init__(policy, env, *args, **kwargs)

    def _setup_model(self) -> None:
        super()._setup_model()
        self.icm: IntrinsicCuriosityModule | None = None
        if self.icm_config is not None:
            obs_dim = int(np.prod(self.observation_space.shape))
            action_dim = int(np.prod(self.action_space.shape))
            self.icm = IntrinsicCuriosityModule(obs_dim, action_dim, self.icm_config).to(self.device)
        self.auxiliary: AuxiliaryHeads | None = None
        if self.auxiliary_config is not None:
            encoder = policy_encoder(self.policy)
            self.auxiliary = AuxiliaryHeads(encoder.latent_dim, self.auxiliary_config).to(self.device)
            self.auxiliary.attach(encoder)
        self._stat_sums: dict[str, float] = {}
        self._stat_counts: dict[str, int] = {}

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts, variables = super()._get_torch_save_params()
        if self.icm is not None:
            state_dicts = [*state_dicts, "icm", "icm.optimizer"]
        if self.auxiliary is not None:
            state_dicts = [*state_dicts, "auxiliary", "auxiliary.optimizer"]
        return state_dicts, variables

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_stat_sums", "_stat_counts"]

    def _accumulate(self, stats: dict[str, float]) -> None:
        for key, value in stats.items():
            self._stat_sums[key] = self._stat_sums.get(key, 0.0) + value
            self._stat_counts[key] = self._stat_counts.get(key, 0) + 1

    def pop_train_stats(self) -> dict[str, float]:
        """Mean SAC losses and ICM diagnostics since the previous call (then starts afresh)."""
        means = {key: total / self._stat_counts[key] for key, total in self._stat_sums.items()}
        self._stat_sums, self._stat_counts = {}, {}
        return means

    def _raise_if_diverged(self, losses: dict[str, float]) -> None:
        bad = {name: value for name, value in losses.items() if not math.isfinite(value)}
        if bad:
            named = ", ".join(f"{name}={value}" for name, value in bad.items())
            raise TrainingDivergedError(
                f"training diverged at timestep {self.num_timesteps}: non-finite {named}; "
                "the weights after this update are not trustworthy"
            )

    def learner_batch(self, batch: ReplayBufferSamples) -> ReplayBufferSamples:
        """What SAC's update sees: the stored reward times ``reward_scale``, plus curiosity."""
        if self.reward_scale != 1.0:
            batch = batch._replace(rewards=batch.rewards * self.reward_scale)
        return batch if self.icm is None else self.curious_batch(batch)

    def curious_batch(self, batch: ReplayBufferSamples) -> ReplayBufferSamples:
        """Intrinsic reward from the ICM as it is, one ICM update on the batch (every
        ``icm.train_freq``-th call), and the mixed reward once the warm-up is over."""
        icm = self.icm
        assert icm is not None, "curious_batch needs the ICM enabled"
        update = self.icm_batches % icm.config.train_freq == 0
        intrinsic, losses = icm.reward_and_update(
            batch.observations, batch.actions, batch.next_observations, update=update
        )
        self.icm_batches += 1
        if losses is not None:
            self._raise_if_diverged({f"icm_{name}": value for name, value in losses.items()})
            self._accumulate({f"icm/{name}": value for name, value in losses.items()})

        extrinsic = batch.rewards
        intrinsic = intrinsic.reshape(extrinsic.shape)
        icm.extrinsic_stats.update(extrinsic)
        if icm.config.match_extrinsic_scale:
            intrinsic = intrinsic * th.sqrt(icm.extrinsic_stats.var).to(intrinsic.dtype)
        weighted_intrinsic = self.intrinsic_weight * intrinsic
        weighted_extrinsic = self.extrinsic_weight * extrinsic
        diagnostics = th.stack(
            [
                intrinsic.mean(),
                weighted_intrinsic.abs().mean() / weighted_extrinsic.abs().mean().clamp_min(1e-12),
            ]
        ).tolist()
        self._accumulate(
            {"icm/intrinsic_reward_mean": diagnostics[0], "icm/intrinsic_extrinsic_ratio": diagnostics[1]}
        )
        if self.num_timesteps < self.icm_warmup_steps:
            return batch
        return batch._replace(rewards=weighted_extrinsic + weighted_intrinsic)

    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        if self.icm is None and self.reward_scale == 1.0:
            super().train(gradient_steps, batch_size)
        else:
            buffer = self.replay_buffer
            self.replay_buffer = _CuriousSampler(buffer, self)  # type: ignore[assignment]
            try:
                super().train(gradient_steps, batch_size)
            finally:
                self.replay_buffer = buffer
        # SB3 records each loss's mean in the logger; reading it back avoids copying SAC.train.
        recorded = self.logger.name_to_value
        losses = {key: float(recorded[f"train/{key}"]) for key in _SAC_LOSS_KEYS if f"train/{key}" in recorded}
        self._raise_if_diverged(losses)
        self._accumulate({f"train/{key}": value for key, value in losses.items()})
        if self.auxiliary is not None:
            # Its own labelled batches after SAC's update: the aux loss moves the shared encoder.
            aux_losses = self.auxiliary.train_on(policy_encoder(self.policy), self.replay_buffer, gradient_steps, batch_size)
            self._raise_if_diverged(aux_losses)
            self._accumulate(aux_losses)


def sac_kwargs(params: dict | None) -> dict[str, Any]:
    """Keyword arguments for SB3's ``SAC`` (hyper-parameters and policy nets) from phase parameters;
    shared by ``build_agent`` and the plain-SAC baseline of the throughput benchmark."""
    resolved = resolve_params(params)
    policy = resolved["policy"]
    return {
        **resolved["sac"],
        "policy_kwargs": {"net_arch": list(policy["net_arch"]), "activation_fn": ACTIVATIONS[policy["activation"]]},
    }


def build_agent(env, params: dict | None, seed: int, device: str = "auto") -> SACWithICM:
    """SAC (+ICM unless ``icm.enabled`` is false) for ``env`` from a phase parameter dict.

    The result is always a ``SACWithICM`` so one class loads every sac_icm checkpoint; with the ICM
    off it trains exactly like SB3's ``SAC`` with the same seed. ``auxiliary.enabled`` adds the
    shared market encoder and its heads, and ``env`` is wrapped as ``wrap_training_env`` says
    (auxiliary targets, curriculum).
    """
    resolved = resolve_params(params)
    auxiliary = AuxiliaryConfig.from_params(resolved["auxiliary"])
    env = wrap_training_env(env, resolved)
    kwargs = sac_kwargs(params)
    if auxiliary is not None:
        kwargs = auxiliary_agent_kwargs(env, auxiliary, kwargs)
    icm_params = dict(resolved["icm"])
    enabled = bool(icm_params.pop("enabled"))
    mixing = {
        "extrinsic_weight": icm_params.pop("extrinsic_weight"),
        "intrinsic_weight": icm_params.pop("intrinsic_weight"),
        "icm_warmup_steps": icm_params.pop("warmup_steps"),
        "reward_scale": resolved["reward"]["scale"],
    }
    return SACWithICM(
        "MlpPolicy",
        env,
        icm=ICMConfig(**icm_params) if enabled else None,
        **mixing,
        **kwargs,
        auxiliary=auxiliary,
        seed=seed,
        device=resolve_device(device),
        verbose=0,
    )
