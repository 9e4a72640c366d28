"""The ``tuning`` section (``TuningParams``, its search space and pruning rule), the checks of it
against the trials' walk-forward protocol, and the chosen values as parameters (``--params``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import optuna

from trading_rl.config import ConfigError, Overlay, Section, setting
from trading_rl.phases.walk_forward import WalkForwardParams, agent_section
from trading_rl.training.params import AgentParams

PARAMS_PREFIX = "tuning"
AGENT = "sac_icm"  # the agent tuned; its sections are those of sac_icm.agent
DATA_END = "train"  # every trial's windows end at the training split's last bar
TUNING_LEDGER_SOURCE = "tuning"  # the ledger rows' source
OBJECTIVE = "median out-of-sample Sharpe over windows x seeds x symbols (a window without a Sharpe counts 0)"
# Set by the tuning pipeline itself, refused in tuning.walk_forward.
FIXED_PROTOCOL = {
    "data_end": "the trials' windows always end at the training split's last bar",
    "agents": f"tuning tunes the {AGENT} agent",
}


@dataclass(frozen=True, kw_only=True)
class SearchDimension(Section):
    """One tuned parameter: a ``float`` or ``int`` range ``[low, high]`` (``log``: sampled on a log
    scale), or ``categorical`` ``choices`` (numbers, strings, booleans: what Optuna stores)."""

    kind: Literal["float", "int", "categorical"]
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: list[Any] | None = None

    def validate(self, prefix: str) -> None:
        if self.kind == "categorical":
            if not self.choices:
                raise ConfigError(f"parameter '{prefix}.choices' must be a non-empty list for kind 'categorical'")
            given = [key for key in ("low", "high") if getattr(self, key) is not None] + (["log"] if self.log else [])
            if given:
                raise ConfigError(f"parameter '{prefix}' is categorical: it takes 'choices', not {given}")
            scalars = (bool, int, float, str)
            if not all(choice is None or isinstance(choice, scalars) for choice in self.choices):
                raise ConfigError(
                    f"parameter '{prefix}.choices' must hold numbers, strings or booleans, got {self.choices!r}"
                )
            return
        if self.choices is not None:
            raise ConfigError(f"parameter '{prefix}' is a {self.kind} range: it takes 'low' and 'high', not 'choices'")
        for key in ("low", "high"):
            value = getattr(self, key)
            if value is None:
                raise ConfigError(f"parameter '{prefix}.{key}' is missing (kind '{self.kind}')")
            if self.kind == "int" and value != int(value):
                raise ConfigError(f"parameter '{prefix}.{key}' must be an integer for kind 'int', got {value!r}")
        low, high = self.bounds()
        if low >= high:
            raise ConfigError(f"parameter '{prefix}.low' ({low}) must be < '{prefix}.high' ({high})")
        if self.log and low <= 0:
            raise ConfigError(f"parameter '{prefix}.low' must be > 0 when 'log' is true, got {low}")

    def bounds(self) -> tuple[float, float]:
        """``(low, high)`` of a range (``validate`` checked both are given)."""
        return float(self.low or 0.0), float(self.high or 0.0)

    def extremes(self) -> list[Any]:
        """The values that bound what may be sampled: both ends, or every choice."""
        if self.kind == "categorical":
            return list(self.choices or [])
        low, high = self.bounds()
        return [int(low), int(high)] if self.kind == "int" else [low, high]


@dataclass(frozen=True, kw_only=True)
class PruningParams(Section):
    """``tuning.pruning``: the median stopping rule, with seeds as the fidelity. A trial first
    trains seeds ``0..rung_seeds-1``; Optuna's ``MedianPruner`` prunes it when its objective there
    is below the median of the completed trials' at the same rung (never before
    ``n_startup_trials`` trials have completed), else it trains its other seeds. Seeds are the
    fidelity because they are independent replicates of the whole walk-forward; its windows are not
    (each fine-tunes the previous one's agent), so a prefix of windows is not a cheaper estimate of
    the same objective. Off by default: at 2 seeds the rung is one seed, whose 3-window median is
    too noisy a verdict to stop a configuration on; turn it on with more seeds (e.g.
    ``walk_forward: {seeds: 4}``, ``rung_seeds: 2``). ``n_startup_trials``: 4, the first batch."""

    enabled: bool = False
    rung_seeds: int = setting(1, interval="[1, inf)")
    n_startup_trials: int = setting(4, interval="[0, inf)")

    def pruner(self) -> optuna.pruners.BasePruner:
        if not self.enabled:
            return optuna.pruners.NopPruner()
        return optuna.pruners.MedianPruner(n_startup_trials=self.n_startup_trials)


def _non_empty(space: dict) -> str | None:
    tuned = [name for name, dimension in space.items() if dimension is not None]
    return None if tuned else "a mapping of dotted sac_icm.agent keys to search dimensions, at least one not null"


@dataclass(frozen=True, kw_only=True)
class TuningParams(Section):
    """The ``tuning`` section: these defaults are its one home, but ``search_space`` has none, and
    conf/base/parameters_tuning.yml is its one place (config envs merge it key by key).

    ``n_trials``: 20, in batches of ``trials_per_population`` 4 (TPE's first 10 trials are random
    anyway, so batching costs the sampler little; TPE treats a batch's running trials as bad, the
    constant liar; a failing batch is rerun one trial at a time). ``walk_forward``: keys of the
    walk_forward section that the trials run with instead (budgets, windows, seeds, symbols); each
    replaces walk_forward's value whole. ``search_space``: dotted
    keys of ``sac_icm.agent`` (applied over ``walk_forward.agent_overrides``) to their dimension;
    ``null`` leaves a key untuned (config envs merge the search space key by key, so this is how
    an env drops a dimension of conf/base). ``trials_per_population``: trials asked of Optuna at a
    time and evaluated as one walk-forward execution (on the population engine their agents train
    as members of the same populations; elsewhere they are more tasks at once). ``pruning``:
    :class:`PruningParams`.
    """

    n_trials: int = setting(20, interval="[1, inf)")
    trials_per_population: int = setting(4, interval="[1, inf)")
    sampler: Literal["tpe", "random"] = "tpe"
    sampler_seed: int | None = None  # null: the run's seed
    walk_forward: Overlay[WalkForwardParams] = setting(Overlay(WalkForwardParams))
    search_space: dict[str, SearchDimension | None] = setting(check=_non_empty)
    # The Optuna study's storage: a SQLite file (one study per run, named after its save version)
    # that `optuna-dashboard sqlite:///<file>` opens; null keeps the study in memory.
    storage: str | None = "data/07_model_output/optuna/tuning.db"
    pruning: PruningParams = setting(PruningParams())

    def dimensions(self) -> dict[str, SearchDimension]:
        """The tuned keys (those not ``null``)."""
        return {name: dimension for name, dimension in self.search_space.items() if dimension is not None}

    def validate(self, prefix: str) -> None:
        for key, reason in FIXED_PROTOCOL.items():
            if key in self.walk_forward:
                raise ConfigError(f"parameter '{prefix}.walk_forward.{key}' is not accepted: {reason}")
        # Each tuned key is one of sac_icm.agent, and each extreme a value it takes over the code
        # defaults (check_search_space checks them over the run's agent and overrides).
        defaults = AgentParams()
        for name, dimension in self.dimensions().items():
            for value in dimension.extremes():
                defaults.overlay(nested({name: value}), f"{prefix}.search_space")


def check_search_space(tuning: TuningParams, protocol: WalkForwardParams, agent: AgentParams) -> None:
    """``agent`` (``sac_icm.agent``) is valid under the trials' ``protocol`` (``trial_protocol``) at
    each dimension's extreme values (``batch_size <= buffer_size`` ...)."""
    agent_params = {AGENT: agent}
    for name, dimension in tuning.dimensions().items():
        for value in dimension.extremes():
            overrides = merge_sections(protocol.agent_overrides, nested({name: value}))
            try:
                agent_section(AGENT, agent_params, overrides)
            except ConfigError as error:
                raise ConfigError(
                    f"parameter '{PARAMS_PREFIX}.search_space.{name}': the trials' agent refuses {value!r} ({error})"
                ) from error


def check_pruning(tuning: TuningParams, protocol: WalkForwardParams) -> None:
    """Pruning, when on, has seeds to save: the trials' ``protocol`` (``trial_protocol``) runs more
    seeds than a rung."""
    pruning = tuning.pruning
    if pruning.enabled and protocol.seeds <= pruning.rung_seeds:
        raise ConfigError(
            f"parameter '{PARAMS_PREFIX}.pruning.rung_seeds' ({pruning.rung_seeds}) must be below the trials' "
            f"seeds ({protocol.seeds}, walk_forward.seeds under {PARAMS_PREFIX}.walk_forward): a trial is pruned "
            f"after its first rung_seeds seeds, so with no seed left there is nothing to save; give the trials "
            f"more seeds or set {PARAMS_PREFIX}.pruning.enabled: false"
        )


def nested(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{"sac.learning_rate": 1e-4}`` -> ``{"sac": {"learning_rate": 1e-4}}``."""
    result: dict[str, Any] = {}
    for key, value in values.items():
        *sections, leaf = key.split(".")
        target = result
        for section in sections:
            target = target.setdefault(section, {})
        target[leaf] = value
    return result


def merge_sections(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` (``walk_forward.agent_overrides`` style: sections of ``sac_icm.agent``) over
    ``base``, section by section."""
    merged = {key: dict(value) if isinstance(value, Mapping) else value for key, value in base.items()}
    for key, value in overrides.items():
        merged[key] = {**merged.get(key, {}), **value} if isinstance(value, Mapping) else value
    return merged


def trial_protocol(walk_forward: WalkForwardParams, tuning: TuningParams) -> WalkForwardParams:
    """The walk_forward parameters every trial runs with: ``tuning.walk_forward`` over the
    walk_forward section (each key replacing its value whole), the tuned agent alone, windows
    ending at the training split's end."""
    return walk_forward.replaced(
        {**tuning.walk_forward, "agents": [AGENT], "data_end": DATA_END}, f"{PARAMS_PREFIX}.walk_forward"
    )


def tuned_parameters(values: Mapping[str, Any]) -> dict[str, Any]:
    """The chosen values as a parameters mapping: for ``sac_icm`` and for the walk-forward (whose
    ``agent_overrides`` would otherwise shadow a tuned key such as ``sac.batch_size``)."""
    # Two copies: one shared dict would be written as a YAML anchor and alias.
    return {"sac_icm": {"agent": nested(values)}, "walk_forward": {"agent_overrides": nested(values)}}


def _dotted_items(mapping: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items = []
    for key, value in mapping.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        items += _dotted_items(value, name) if isinstance(value, Mapping) else [(name, value)]
    return items


def params_argument(parameters: Mapping[str, Any]) -> str:
    """``parameters`` as the value of ``kedro run --params`` (dotted keys, YAML scalars)."""
    return ",".join(f"{key}={json.dumps(value)}" for key, value in _dotted_items(parameters))
