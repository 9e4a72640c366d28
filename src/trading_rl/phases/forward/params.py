"""The ``forward`` parameter section: drift and decay thresholds, and whether to supersede the record."""

from __future__ import annotations

from dataclasses import dataclass

from trading_rl.config import Section, setting


@dataclass(frozen=True, kw_only=True)
class DriftParams(Section):
    window_bars: int | None = setting(63, interval="[2, inf)")  # newest forward bars compared; null: all
    bins: int = setting(10, interval="[2, inf)")  # PSI bins at the training split's quantiles
    psi_max: float = setting(0.25, interval="(0, inf)")  # a feature drifted: PSI above this ...
    ks_alpha: float = setting(0.01, interval="(0, 1)")  # ... and KS p-value below this
    min_drifted_features: int = setting(1, interval="[1, inf)")  # alert from this many drifted features
    action_psi_max: float = setting(0.25, interval="(0, inf)")  # action-bucket PSI vs the validation split


@dataclass(frozen=True, kw_only=True)
class DecayParams(Section):
    min_bars: int = setting(20, interval="[2, inf)")  # forward bars before any check is judged
    psr_min: float = setting(0.05, interval="(0, 1)")  # alert when P(forward Sharpe > walk-forward median) is below
    walk_forward_agent: str = "sac_icm"  # the walk-forward agent whose windows are the reference


@dataclass(frozen=True, kw_only=True)
class ForwardParams(Section):
    """The ``forward`` parameter section."""

    drift: DriftParams = setting(DriftParams())
    decay: DecayParams = setting(DecayParams())
    # true: the previous record of the deployed model is not continued but replaced by a replay of
    # the price file as it is now (after bars it scored were corrected); its versions stay on disk
    supersede_record: bool = False
