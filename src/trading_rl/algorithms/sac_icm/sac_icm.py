"""SB3 SAC with an Intrinsic Curiosity Module, reusing SB3's own SAC update.

The hook is the replay-buffer sample: during ``train`` the buffer is wrapped so every sampled batch
(1) gets an intrinsic reward from the ICM, (2) trains the ICM on that same batch and (3) after a
warm-up carries ``extrinsic_weight·r_ext + intrinsic_weight·r_int`` as its reward. Everything
curiosity needs happens batched on the learner side; nothing runs per env step, which keeps the env
loop as fast as plain SAC's. With the ICM switched off and reward scale 1 the class *is* plain SAC
(same numbers for the same seed) plus the divergence guard.
"""

from __future__ import annotations

import io
import math
import pathlib
from dataclasses import fields
from typing import Any, TypeVar

import torch as th
from gymnasium.spaces import flatdim
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, ReplayBufferSamples

from trading_rl.algorithms.sac_icm.auxiliary import (
    AuxiliaryHeads,
    AuxiliaryReplayBuffer,
    auxiliary_agent_kwargs,
    policy_encoder,
)
from trading_rl.algorithms.sac_icm.critics import RegularisedCriticPolicy
from trading_rl.algorithms.sac_icm.icm import IntrinsicCuriosityModule, MovingAverage
from trading_rl.algorithms.sac_icm.training_env import wrap_training_env
from trading_rl.training.device import resolve_device
from trading_rl.training.moved_classes import moved_class_objects
from trading_rl.training.params import AgentParams, AuxiliaryConfig, ICMConfig, TrainingDivergedError
from trading_rl.training.sb3_logging import quiet_logging_for_setup

# Losses SB3's SAC.train records (means over the gradient steps of one call).
_SAC_LOSS_KEYS = ("actor_loss", "critic_loss", "ent_coef_loss", "ent_coef")
_ICM_LOSS_KEYS = ("forward_loss", "inverse_loss", "total_loss")


def mix_curiosity(
    extrinsic: th.Tensor,
    intrinsic: th.Tensor,
    extrinsic_scale: MovingAverage,
    match_extrinsic_scale: bool | th.Tensor,
    extrinsic_weight: float | th.Tensor,
    intrinsic_weight: float | th.Tensor,
) -> tuple[th.Tensor, dict[str, th.Tensor]]:
    """The learner reward ``w_e·extrinsic + w_i·intrinsic`` (the intrinsic reward rescaled to the
    moving std of the extrinsic one when ``match_extrinsic_scale``) and its diagnostics.

    ``extrinsic``: ``[..., batch, 1]``; the leading axes, if any, are a population's members, and the
    statistic and settings then have one entry per member (shape ``[...]``, weights ``[..., 1, 1]``).
    ``icm/effective_share`` is the share of the learner reward's variation that curiosity carries in
    the batch: what ``intrinsic_weight`` is meant to set (report it once the warm-up is over).
    """
    batch_axes = (-2, -1)
    intrinsic = intrinsic.reshape(extrinsic.shape)
    extrinsic_scale.update(extrinsic.std(dim=batch_axes, unbiased=False))
    scale = extrinsic_scale.value.to(intrinsic.dtype)
    match = th.as_tensor(match_extrinsic_scale, device=scale.device)
    intrinsic = intrinsic * th.where(match, scale, th.ones_like(scale))[..., None, None]
    weighted_intrinsic = intrinsic_weight * intrinsic
    mixed = extrinsic_weight * extrinsic + weighted_intrinsic
    stats = {
        "icm/intrinsic_reward_mean": intrinsic.mean(dim=batch_axes),
        "icm/effective_share": weighted_intrinsic.std(dim=batch_axes) / mixed.std(dim=batch_axes).clamp_min(1e-12),
    }
    return mixed, stats


class _CuriousSampler:
    """Stands in for the replay buffer inside ``SAC.train``: samples from the real buffer and passes
    the batch through the agent's curiosity step."""

    def __init__(self, buffer, agent: SACWithICM) -> None:
        self._buffer = buffer
        self._agent = agent

    def sample(self, batch_size: int, env=None) -> ReplayBufferSamples:
        return self._agent.learner_batch(self._buffer.sample(batch_size, env=env))


SelfSACWithICM = TypeVar("SelfSACWithICM", bound="SACWithICM")


class SACWithICM(SAC):
    """SAC whose sampled rewards include ICM curiosity after ``icm_warmup_steps`` env steps.

    ``icm=None`` switches curiosity off (plain SAC). Any non-finite actor, critic, entropy or ICM
    loss raises ``TrainingDivergedError`` naming the loss and the timestep. The keyword defaults are
    ``sac_icm.agent``'s (``AgentParams``), so a model built without them learns as the phase's does.
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
        reward_scale: float = 100.0,
        auxiliary: AuxiliaryConfig | None = None,
        **kwargs,
    ) -> None:
        # Set before SAC.__init__, which builds the model (and so the ICM) through _setup_model.
        self.icm_config = icm
        self.auxiliary_config = auxiliary
        self.extrinsic_weight = float(extrinsic_weight)
        self.intrinsic_weight = float(intrinsic_weight)
        self.icm_warmup_steps = int(icm_warmup_steps)
        self.reward_scale = float(reward_scale)
        # Batches seen by the ICM; a plain int (saved with the model) so ``icm.train_freq`` survives
        # save/load without a device round trip per batch.
        self.icm_batches = 0
        super().__init__(policy, env, *args, **kwargs)

    @classmethod
    def load(
        cls: type[SelfSACWithICM],
        path: str | pathlib.Path | io.BufferedIOBase,
        env: GymEnv | None = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs,
    ) -> SelfSACWithICM:
        """SB3's ``load``; a zip saved before the classes it names moved loads too
        (``training.moved_classes``)."""
        moved = moved_class_objects(path)
        if moved:
            custom_objects = {**moved, **(custom_objects or {})}
        return super().load(path, env, device, custom_objects, print_system_info, force_reset, **kwargs)

    def _setup_model(self) -> None:
        # Here, not in __init__: SB3's ``load`` sets the saved (or overridden) attributes and then
        # calls this, so a scale given to ``load`` is checked too.
        if not self.reward_scale > 0:
            raise ValueError(f"parameter 'sac_icm.agent.reward_scale' must be > 0, got {self.reward_scale}")
        super()._setup_model()
        self.icm: IntrinsicCuriosityModule | None = None
        if self.icm_config is not None:
            obs_dim = flatdim(self.observation_space)
            action_dim = flatdim(self.action_space)
            self.icm = IntrinsicCuriosityModule(obs_dim, action_dim, self.icm_config).to(self.device)
        self.auxiliary: AuxiliaryHeads | None = None
        if self.auxiliary_config is not None:
            encoder = policy_encoder(self.policy)
            self.auxiliary = AuxiliaryHeads(encoder.latent_dim, self.auxiliary_config).to(self.device)
            self.auxiliary.attach(encoder)
        self._stat_sums: dict[str, float] = {}
        self._stat_counts: dict[str, int] = {}

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        # SB3 gives each ``learn`` a fresh logger here, and with it an empty tempdir/SB3-<time>
        # folder (``training.sb3_logging``): a fresh ``quiet_logger`` instead, for this ``learn`` only
        # as SB3's own (a logger set with ``set_logger`` is kept). Here, not where the model is built:
        # ``load`` (copies, checkpoints, reloaded models) drops a logger set before.
        with quiet_logging_for_setup(self):
            return super()._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar)

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
        batch = self.scaled_batch(batch)
        return batch if self.icm is None else self.curious_batch(batch)

    def scaled_batch(self, batch: ReplayBufferSamples) -> ReplayBufferSamples:
        """The stored reward times ``reward_scale`` (curiosity is mixed into the scaled reward)."""
        return batch if self.reward_scale == 1.0 else batch._replace(rewards=batch.rewards * self.reward_scale)

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

        warm = self.num_timesteps >= self.icm_warmup_steps
        mixed, stats = mix_curiosity(
            batch.rewards,
            intrinsic,
            icm.extrinsic_scale,
            icm.config.match_extrinsic_scale,
            self.extrinsic_weight,
            self.intrinsic_weight,
        )
        if not warm:
            del stats["icm/effective_share"]
        self._accumulate(dict(zip(stats, th.stack(list(stats.values())).tolist())))
        return batch._replace(rewards=mixed) if warm else batch

    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        if self.icm is None and self.reward_scale == 1.0:
            super().train(gradient_steps, batch_size)
        else:
            buffer = self.replay_buffer
            # Duck-typed: SAC.train only calls ``sample`` on it.
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
            labelled = self.replay_buffer
            if not isinstance(labelled, AuxiliaryReplayBuffer):
                raise TypeError(
                    "the auxiliary heads train on an AuxiliaryReplayBuffer (replay_buffer_class), "
                    f"got {type(labelled).__name__}"
                )
            aux_losses = self.auxiliary.train_on(policy_encoder(self.policy), labelled, gradient_steps, batch_size)
            self._raise_if_diverged(aux_losses)
            self._accumulate(aux_losses)


def sac_kwargs(params: AgentParams) -> dict[str, Any]:
    """Keyword arguments for SB3's ``SAC`` (hyper-parameters and policy nets) from the agent
    section; shared by ``build_agent`` and the plain-SAC baseline of the throughput benchmark."""
    return {**params.sac.to_dict(), "policy_kwargs": params.policy.policy_kwargs()}


def policy_class(params: AgentParams) -> str | type[RegularisedCriticPolicy]:
    """SB3's ``MlpPolicy``, or the DroQ critics' policy where ``policy.critic_*`` switch them on."""
    return RegularisedCriticPolicy if params.policy.regularised_critics else "MlpPolicy"


def build_agent(env, params: AgentParams, seed: int, device: str = "auto") -> SACWithICM:
    """SAC (+ICM unless ``icm.enabled`` is false) for ``env`` from the ``sac_icm.agent`` section.

    The result is always a ``SACWithICM`` so one class loads every sac_icm checkpoint; with the ICM
    off it trains exactly like SB3's ``SAC`` with the same seed. ``auxiliary.enabled`` adds the
    shared market encoder and its heads, and ``env`` is wrapped as ``wrap_training_env`` says
    (auxiliary targets, curriculum).
    """
    auxiliary = params.auxiliary.config()
    env = wrap_training_env(env, params.curriculum, auxiliary)
    kwargs = sac_kwargs(params)
    if auxiliary is not None:
        kwargs = auxiliary_agent_kwargs(env, auxiliary, kwargs)
    icm = params.icm
    return SACWithICM(
        policy_class(params),
        env,
        icm=ICMConfig(**{f.name: getattr(icm, f.name) for f in fields(ICMConfig)}) if icm.enabled else None,
        extrinsic_weight=icm.extrinsic_weight,
        intrinsic_weight=icm.intrinsic_weight,
        icm_warmup_steps=icm.warmup_steps,
        reward_scale=params.reward_scale,
        **kwargs,
        auxiliary=auxiliary,
        seed=seed,
        device=resolve_device(device),
        verbose=0,
    )
