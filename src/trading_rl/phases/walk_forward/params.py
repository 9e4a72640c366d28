"""The ``walk_forward`` section and the job that one walk-forward execution runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from trading_rl.algorithms.es.es import EsParams
from trading_rl.algorithms.vtrace.actor_learner import VTraceLearnerParams
from trading_rl.config import ConfigError, Overlay, Section, setting
from trading_rl.envs import EnvConfig, EnvConstructionParams, periods_per_year_by_symbol
from trading_rl.features import max_lookback
from trading_rl.features.indicators import FeatureParams
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.phases.walk_forward.trainers import AGENT_TRAINERS
from trading_rl.training.params import AgentParams, SacIcmParams

PARAMS_PREFIX = "walk_forward"


def _data_end_problem(data_end: str) -> str | None:
    """``walk_forward.data_end``: what ``evaluation.folds.development_prices`` accepts."""
    if data_end in ("train", "validation", "all"):
        return None
    try:
        pd.Timestamp(data_end)
    except (TypeError, ValueError):
        return "'train', 'validation', 'all' or a date"
    return None


def _agents_problem(agents: list[str]) -> str | None:
    unknown = [name for name in agents if name not in AGENT_TRAINERS]
    if not agents or unknown or len(set(agents)) != len(agents):
        return f"a non-empty list of distinct agents among {sorted(AGENT_TRAINERS)}"
    return None


@dataclass(frozen=True, kw_only=True)
class WalkForwardParams(Section):
    """The ``walk_forward`` section; these defaults are its one home (conf/ states what differs).
    ``vtrace`` and ``es`` configure those agents when ``agents`` lists them (their budget:
    ``timesteps``, and ``es.generations``)."""

    symbols: list[str] | None = None  # null: every symbol in `prices`; or a list of names
    # Bars the walk-forward may use. `validation`: through the validation split's end, so the default
    # run (and any choice made from its numbers) never sees the test split; `final_evaluation` spends
    # that once. `all`: every bar (reruns on new data after the test split was spent); or an ISO date.
    data_end: str | None = setting("validation", check=_data_end_problem)
    # Windows in bars, anchored at data_end (the last test window ends on its last bar).
    train_length: int = setting(1000, interval="[1, inf)")
    test_length: int = setting(250, interval="[1, inf)")
    step: int = setting(250, interval="[1, inf)")
    # Purge + embargo between a training window and its test window; null: the longest feature
    # look-back (with_gap). A smaller value is refused.
    gap_bars: int | None = setting(None, interval="[0, inf)")
    max_folds: int | None = setting(3, interval="[1, inf)")  # the most recent folds only; all / null: every one
    # Rolling retraining: fold 0 trains from scratch (`timesteps`), every later fold fine-tunes the
    # previous fold's agent on its own training window (`finetune_timesteps`), replay buffer kept.
    retrain_frequency: int = setting(3, interval="[1, inf)")
    # Two seeds keep the default run within its 10 minutes on 2 cores; conf/gpu runs 5, and
    # conf/research every window with 5 seeds.
    seeds: int = setting(2, interval="[1, inf)")
    # Names in AGENT_TRAINERS ("sac" = SAC+ICM with the ICM off).
    agents: list[str] = setting(["sac_icm"], check=_agents_problem)
    timesteps: int = setting(10_000, interval="[1, inf)")  # env steps of fold 0's agent (the validated learner's)
    finetune_timesteps: int = setting(1000, interval="[0, inf)")
    # Keys of sac_icm.agent laid over it; {}: the phase's agent as it is (the validated learner since
    # 2026-12-06; conf/seeds restores the seeds' [64, 64] walk-forward network).
    agent_overrides: Overlay[AgentParams] = setting(Overlay(AgentParams))
    device: str = setting("auto", runtime=True)
    vtrace: VTraceLearnerParams = setting(VTraceLearnerParams())
    es: EsParams = setting(EsParams())

    @classmethod
    def from_mapping(cls, config: Any = None, prefix: str = PARAMS_PREFIX, base: Any = None) -> WalkForwardParams:
        """``max_folds: all`` is the documented spelling of ``null`` (every window that fits)."""
        if isinstance(config, Mapping) and config.get("max_folds") == "all":
            config = {**config, "max_folds": None}
        return super().from_mapping(config, prefix, base)

    def with_gap(self, features: FeatureParams) -> WalkForwardParams:
        """These parameters with ``gap_bars`` checked against the features' longest look-back:
        ``null`` becomes that look-back; a smaller explicit gap is a ``ConfigError`` because test
        features would then reach back into training bars."""
        lookback = max_lookback(features)
        if self.gap_bars is None:
            return dataclasses.replace(self, gap_bars=lookback)
        if self.gap_bars < lookback:
            raise ConfigError(
                f"parameter '{PARAMS_PREFIX}.gap_bars' is {self.gap_bars}, smaller than the longest feature "
                f"look-back ({lookback} bars): test features would reach back into training bars"
            )
        return self


@dataclass(frozen=True)
class WalkForwardJob:
    """What every task of one walk-forward execution shares besides the windows: the resolved
    ``feature_extraction`` and ``env_construction.env`` sections the fold specs are built from (the
    ledger's identity hashes them as they act, ``Section.identity``), periods per year by symbol,
    each agent's parameters by agent name (``sac_icm``: an ``AgentParams``; ``options`` / ``shaped``:
    ``{"source": AgentParams, "phase": that phase's section}``) and the run's seed."""

    feature_extraction: FeatureExtractionParams
    env: EnvConfig
    periods_per_year: Mapping[str, float]
    agent_params: Mapping[str, Any]
    seed: int

    @classmethod
    def of(
        cls,
        frames: Mapping[str, pd.DataFrame],
        feature_extraction: FeatureExtractionParams,
        env_construction: EnvConstructionParams,
        sac_icm: SacIcmParams,
        seed: int,
    ) -> WalkForwardJob:
        """The job of a run's sections (``walk_forward`` and ``tuning`` run it); ``frames``: prices
        by symbol, whose bars give the periods per year ``env_construction`` does not set."""
        return cls(
            feature_extraction=feature_extraction,
            env=env_construction.env,
            periods_per_year=periods_per_year_by_symbol(env_construction.periods_per_year, frames),
            agent_params={"sac_icm": sac_icm.agent},
            seed=seed,
        )

    def with_walk_forward_agents(self, config: WalkForwardParams) -> dict[str, Any]:
        """``agent_params`` plus the agents configured inside ``walk_forward`` (``vtrace``, ``es``)."""
        return {"vtrace": config.vtrace, "es": config.es, **self.agent_params}
