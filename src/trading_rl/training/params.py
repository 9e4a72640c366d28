"""The parameter sections of ``sac_icm.agent`` that the learners and the training loop read
(``AgentParams`` and its parts), the configurations built from them (``ICMConfig``,
``AuxiliaryConfig``), and the training loop's divergence error.

Here, below the algorithms, so that an algorithm, the training loop and the phases can all read
them without importing one another's agent modules.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

from torch import nn

from trading_rl.config import ConfigError, Overlay, Section, layer_widths_problem, require_not_above, setting
from trading_rl.evaluation.metrics.metrics import metric_keys
from trading_rl.evaluation.validation.regimes import RegimeParams
from trading_rl.monitoring.collapse import CollapseThresholds
from trading_rl.training.curriculum import CurriculumParams

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "leaky_relu": nn.LeakyReLU,
    "gelu": nn.GELU,
}
HEADS: tuple[str, ...] = ("next_return", "volatility", "volume", "regime")


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


# The sections of ``sac_icm.agent`` (docs/pipelines.md, "sac_icm"): these defaults are their one home
# (conf/ states only what differs; `trading-rl params sac_icm` prints the resolved section). Every
# section is validated here, so a typo anywhere fails before training starts.
def _best_metric_problem(value: str) -> str | None:
    """``training.best_metric``: a key of the evaluation's metrics (``compute_metrics``)."""
    return None if value in metric_keys() else f"one of {list(metric_keys())}"


@dataclass(frozen=True, kw_only=True)
class SacParams(Section):
    """SB3 SAC keyword arguments."""

    learning_rate: float = setting(3e-4, interval="(0, inf)")
    buffer_size: int = setting(20_000, interval="[1, inf)")
    learning_starts: int = setting(300, interval="[0, inf)")
    batch_size: int = setting(64, interval="[1, inf)")
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
    # The validated learner's (docs/results.md "Controls"); conf/seeds: [256, 256, 128].
    net_arch: list[int] = setting([32, 32], check=layer_widths_problem)
    activation: str = setting("relu", choices=tuple(ACTIVATIONS))
    # Sample-efficient critics (docs/algorithms.md, "Critic options"): REDQ-style ensembles (more Q
    # networks, SAC's target the minimum over all) and DroQ's dropout and layer norm in every hidden
    # layer of the Q networks, both meant for a higher update-to-data ratio (``sac.gradient_steps``).
    n_critics: int = setting(2, interval="[1, inf)", omitted_at_default=True)
    critic_dropout: float = setting(0.0, interval="[0, 1)", omitted_at_default=True)
    critic_layer_norm: bool = setting(False, omitted_at_default=True)

    def policy_kwargs(self) -> dict:
        """SB3's ``policy_kwargs``; the critics' regularisers only where switched on (the
        ``RegularisedCriticPolicy`` reads them)."""
        kwargs: dict = {"net_arch": list(self.net_arch), "activation_fn": ACTIVATIONS[self.activation]}
        if self.n_critics != 2:
            kwargs["n_critics"] = self.n_critics
        if self.regularised_critics:
            kwargs.update(critic_dropout=self.critic_dropout, critic_layer_norm=self.critic_layer_norm)
        return kwargs

    @property
    def regularised_critics(self) -> bool:
        return self.critic_dropout > 0 or self.critic_layer_norm


@dataclass(frozen=True)
class ICMConfig:
    """Curiosity settings (docs/pipelines.md, "sac_icm")."""

    eta: float = 0.01
    beta: float = 0.2
    feature_dim: int = 64
    hidden_dim: int = 128
    lr: float = 1e-3
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    train_freq: int = 1
    reward_clip: float = 5.0
    # Per-batch decay of the moving averages behind the intrinsic reward's normalisation (and the
    # extrinsic reward's scale, below): 0.95 remembers about the last 20 batches, fast enough to follow
    # the forward model's falling error (0.99 lagged it on the toy env and started at a 0.02 share).
    scale_decay: float = 0.95
    # Rescale the normalised intrinsic reward to the running std of the extrinsic reward before
    # mixing: daily log-return rewards are ~1e-3 while a normalised curiosity reward is ~1, so
    # without it a 0.1 curiosity weight would still drown the P&L signal.
    match_extrinsic_scale: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"icm.beta must be in [0, 1], got {self.beta}")
        if not 0.0 < self.scale_decay < 1.0:
            raise ValueError(f"icm.scale_decay must be in (0, 1), got {self.scale_decay}")
        for name in ("eta", "lr", "grad_clip", "reward_clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"icm.{name} must be > 0, got {getattr(self, name)}")
        for name in ("feature_dim", "hidden_dim", "train_freq"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"icm.{name} must be a positive integer, got {getattr(self, name)}")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class IcmParams(ICMConfig, Section):
    """``ICMConfig`` (its fields, defaults and checks) plus how the phase mixes curiosity in."""

    enabled: bool = False  # curiosity off: no gain shown on the controls (docs/results.md); conf/seeds: on
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
    # parameters (trading_rl.training.resume).
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


def _quantiles_problem(quantiles: list[float]) -> str | None:
    if len(quantiles) == 2 and 0.0 < quantiles[0] < quantiles[1] < 1.0:
        return None
    return "two increasing numbers in (0, 1)"


@dataclass(frozen=True, kw_only=True)
class AuxiliaryParams(Section):
    """``sac_icm.agent.auxiliary``. ``weights`` left out of the mapping are 0 (the head is not
    built); ``regimes`` are ``label_regimes`` parameters over regime_validation's defaults (an
    :class:`~trading_rl.config.Overlay`: written as given, ``{}``, so recorded configurations and
    resume identities stay as they were)."""

    enabled: bool = False
    weights: dict[str, float] = setting({"next_return": 1.0, "volatility": 1.0, "volume": 0.5, "regime": 0.5})
    volatility_horizon: int = setting(5, interval="[2, inf)")  # k: realised volatility of the next k bars
    volume_window: int = setting(20, interval="[1, inf)")  # next bar's volume over the mean of the bars before
    # ... classed low / normal / high at these training-bar quantiles
    volume_quantiles: list[float] = setting([0.33, 0.67], check=_quantiles_problem)
    latent_dim: int = setting(64, interval="[1, inf)")
    hidden_dim: int = setting(128, interval="[1, inf)")
    lr: float = setting(3.0e-4, interval="(0, inf)")
    grad_clip: float = setting(1.0, interval="(0, inf)")
    regimes: Overlay[RegimeParams] = setting(Overlay(RegimeParams))

    def validate(self, prefix: str) -> None:
        unknown = sorted(set(self.weights) - set(HEADS))
        if unknown:
            raise ConfigError(f"unknown parameter '{prefix}.weights.{unknown[0]}'; heads: {list(HEADS)}")
        for head, weight in self.weights.items():
            if weight < 0:
                raise ConfigError(f"parameter '{prefix}.weights.{head}' must be a number >= 0, got {weight!r}")
        if not any(self.weights.values()):
            raise ConfigError(f"parameter '{prefix}.weights' gives every head weight 0: switch auxiliary off instead")

    def config(self) -> AuxiliaryConfig | None:
        """What the heads and targets read; ``None`` when the heads are switched off."""
        if not self.enabled:
            return None
        return AuxiliaryConfig(
            weights={head: self.weights.get(head, 0.0) for head in HEADS},
            volatility_horizon=self.volatility_horizon,
            volume_window=self.volume_window,
            volume_quantiles=(self.volume_quantiles[0], self.volume_quantiles[1]),
            latent_dim=self.latent_dim,
            hidden_dim=self.hidden_dim,
            lr=self.lr,
            grad_clip=self.grad_clip,
            regimes=self.regimes.over_defaults,
        )


@dataclass(frozen=True)
class AuxiliaryConfig:
    """The switched-on heads' settings (``AuxiliaryParams.config``): every head's weight, the
    regime labels' parameters."""

    weights: dict[str, float]
    volatility_horizon: int
    volume_window: int
    volume_quantiles: tuple[float, float]
    latent_dim: int
    hidden_dim: int
    lr: float
    grad_clip: float
    regimes: RegimeParams


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


class TrainingDivergedError(RuntimeError):
    """A loss became NaN/inf: the weights are no longer trustworthy."""
