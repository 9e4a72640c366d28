"""SB3 SAC with an Intrinsic Curiosity Module, reusing SB3's own SAC update.

The hook is the replay-buffer sample: during ``train`` the buffer is wrapped so every sampled batch
(1) gets an intrinsic reward from the ICM, (2) trains the ICM on that same batch and (3) after a
warm-up carries ``extrinsic_weight·r_ext + intrinsic_weight·r_int`` as its reward. Everything
curiosity needs happens batched on the learner side; nothing runs per env step, which keeps the env
loop as fast as plain SAC's. With the ICM switched off and reward scale 1 the class *is* plain SAC
(same numbers for the same seed) plus the divergence guard.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

import torch as th
from gymnasium.spaces import flatdim
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.type_aliases import MaybeCallback, ReplayBufferSamples
from torch import nn

from trading_rl.agents.auxiliary import (
    AuxiliaryConfig,
    AuxiliaryHeads,
    AuxiliaryParams,
    AuxiliaryReplayBuffer,
    auxiliary_agent_kwargs,
    policy_encoder,
)
from trading_rl.agents.curriculum import CurriculumParams
from trading_rl.agents.device import resolve_device
from trading_rl.agents.icm import ICMConfig, IntrinsicCuriosityModule, MovingAverage
from trading_rl.agents.sb3_logging import quiet_logging_for_setup
from trading_rl.agents.training_env import wrap_training_env
from trading_rl.config import Section, layer_widths_problem, require_not_above, setting
from trading_rl.evaluation.metrics import metric_keys
from trading_rl.monitoring.collapse import CollapseThresholds

PARAMS_PREFIX = "sac_icm"

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "leaky_relu": nn.LeakyReLU,
    "gelu": nn.GELU,
}


def entropy_coefficient_problem(value: str | float) -> str | None:
    """SB3's ``ent_coef``: ``auto``, ``auto_<initial value>`` (learned from it) or a fixed positive
    number; anything else (``autox``) SB3 would read as ``auto``."""
    expected = "'auto', 'auto_<positive number>' or a positive number"
    if isinstance(value, str):
        if value == "auto":
            return None
        try:
            initial = float(value.removeprefix("auto_")) if value.startswith("auto_") else math.nan
        except ValueError:
            return expected
        return None if math.isfinite(initial) and initial > 0 else expected
    return None if value > 0 else expected


def _best_metric_problem(value: str) -> str | None:
    """``training.best_metric``: a key of the evaluation's metrics (``compute_metrics``)."""
    return None if value in metric_keys() else f"one of {list(metric_keys())}"


# The sections of ``sac_icm.agent`` (docs/pipelines.md, "sac_icm"). conf/base states
# the same values (tests/test_config.py checks it). Every section is validated here, so a typo
# anywhere fails before training starts.
@dataclass(frozen=True, kw_only=True)
class SacParams(Section):
    """SB3 SAC keyword arguments."""

    learning_rate: float = setting(3e-4, interval="(0, inf)")
    buffer_size: int = setting(100_000, interval="[1, inf)")
    learning_starts: int = setting(1000, interval="[0, inf)")
    batch_size: int = setting(256, interval="[1, inf)")
    tau: float = setting(0.005, interval="(0, 1]")
    gamma: float = setting(0.99, interval="(0, 1]")
    train_freq: int = setting(1, interval="[1, inf)")
    gradient_steps: int = setting(1, check=lambda v: None if v >= 1 or v == -1 else ">= 1, or -1 (one per env step)")
    ent_coef: str | float = setting("auto", check=entropy_coefficient_problem)
    target_entropy: str | float = setting(
        "auto", check=lambda v: None if v == "auto" or not isinstance(v, str) else "'auto' or a number"
    )
    target_update_interval: int = setting(1, interval="[1, inf)")

    def validate(self, prefix: str) -> None:
        require_not_above(self, prefix, "batch_size", "buffer_size")


@dataclass(frozen=True, kw_only=True)
class PolicyParams(Section):
    net_arch: list[int] = setting([256, 256, 128], check=layer_widths_problem)
    activation: str = setting("relu", choices=tuple(ACTIVATIONS))


@dataclass(frozen=True, kw_only=True)
class IcmParams(ICMConfig, Section):
    """``ICMConfig`` (its fields, defaults and checks) plus how the phase mixes curiosity in."""

    enabled: bool = True
    extrinsic_weight: float = setting(0.9, interval="[0, inf)")
    intrinsic_weight: float = setting(0.1, interval="[0, inf)")
    warmup_steps: int = setting(1000, interval="[0, inf)")


@dataclass(frozen=True, kw_only=True)
class TrainingParams(Section):
    total_timesteps: int = setting(10_000, interval="[1, inf)")
    eval_freq: int = setting(2500, interval="[1, inf)")
    eval_episodes: int = setting(1, interval="[1, inf)")
    resume_every: int = setting(2500, interval="[1, inf)", runtime=True)
    # auto: continue only a checkpoint of this exact run; force: also one written with other
    # parameters (trading_rl.agents.resume).
    resume: str = setting("auto", choices=("auto", "force"), runtime=True)
    log_interval: int = setting(10, interval="[1, inf)", runtime=True)
    # The evaluation metric that picks the best model (higher is better): a key of compute_metrics.
    best_metric: str = setting("sharpe", check=_best_metric_problem)


@dataclass(frozen=True, kw_only=True)
class CollapseParams(CollapseThresholds):
    """The collapse gates' thresholds and the training monitor's window."""

    REFUSED = {
        "hold_threshold": "the collapse monitor uses the env's own 'env_construction.env.hold_threshold', "
        "as the reports do; set it there",
    }

    window: int = setting(1000, interval="[1, inf)")
    check_freq: int = setting(1000, interval="[1, inf)", runtime=True)
    fail_on_collapse: bool = setting(False, runtime=True)


@dataclass(frozen=True, kw_only=True)
class AgentParams(Section):
    """``sac_icm.agent``: everything ``build_agent`` and ``train_agent`` read."""

    RENAMED = {"reward": "reward_scale"}

    sac: SacParams = setting(SacParams())
    policy: PolicyParams = setting(PolicyParams())
    # The learner's view of the P&L reward: daily log returns of a position capped at 15% of equity
    # are ~1e-4, so small that SAC's entropy term swamps them and the policy mean sits in the hold
    # zone. Scaling (SAC paper's "reward scale") changes what the critic sees, not the env's reward.
    # Measured: at scale 1 every one of 6 base runs collapsed to hold; at 100, 5 of 6 traded
    # (docs/results.md).
    # The one reward scale of every SAC learner (``SACWithICM.reward_scale``, applied where the
    # learner reads its sampled rewards).
    reward_scale: float = setting(100.0, interval="(0, inf)")
    icm: IcmParams = setting(IcmParams())
    training: TrainingParams = setting(TrainingParams())
    collapse: CollapseParams = setting(CollapseParams())
    # Phase E, both off by default (docs/algorithms.md): heads on a shared market encoder, and a
    # curriculum over the training bars.
    auxiliary: AuxiliaryParams = setting(AuxiliaryParams())
    curriculum: CurriculumParams = setting(CurriculumParams())


@dataclass(frozen=True, kw_only=True)
class SacIcmParams(Section):
    """The ``sac_icm`` section. Its phase-level keys have no code default: conf/base is their one
    place."""

    device: str = setting(runtime=True)
    progress_bar: bool | str = setting(
        check=lambda v: None if v in (True, False, "auto") else "true, false or 'auto'", runtime=True
    )
    evaluation_split: Literal["train", "validation", "test"]
    resume_dir: str = setting(runtime=True)
    agent: AgentParams = setting(AgentParams())


# Losses SB3's SAC.train records (means over the gradient steps of one call).
_SAC_LOSS_KEYS = ("actor_loss", "critic_loss", "ent_coef_loss", "ent_coef")
_ICM_LOSS_KEYS = ("forward_loss", "inverse_loss", "total_loss")


class TrainingDivergedError(RuntimeError):
    """A loss became NaN/inf: the weights are no longer trustworthy."""


def copy_sections(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of an agent parameter dict that a caller may change section by section (each section
    copied; scalar keys such as ``reward_scale`` as they are)."""
    return {key: dict(value) if isinstance(value, Mapping) else value for key, value in dict(params or {}).items()}


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
        # folder (``agents.sb3_logging``): a fresh ``quiet_logger`` instead, for this ``learn`` only
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
    return {
        **params.sac.to_dict(),
        "policy_kwargs": {
            "net_arch": list(params.policy.net_arch),
            "activation_fn": ACTIVATIONS[params.policy.activation],
        },
    }


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
        "MlpPolicy",
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
