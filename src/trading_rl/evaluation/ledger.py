"""The trial ledger: every configuration evaluated on a period, one row each, appended, never rewritten.

A row is one configuration (agent + the parameters that define it, hashed with
``provenance.config_hash``) evaluated once on one period of one symbol, with the moments of its
pooled out-of-sample returns (all its runs: seeds × folds). The ledger is what the Deflated Sharpe
Ratio counts: the number of configurations tried for a symbol and the spread of their per-period
Sharpe ratios (Bailey & López de Prado 2014), and what ``final_evaluation`` checks before it spends
the test split.

Storage is a folder of immutable Parquet files, one per append (``append_rows``): a new file is
written under a temporary name and hard-linked to its final name, which fails rather than replace
an existing file. ``read_ledger`` returns every row of every file in file-name (= time) order.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.evaluation.metrics import (
    MOMENT_KEYS,
    expected_max_sharpe,
    psr_from_moments,
    sharpe_from_moments,
)
from trading_rl.provenance import config_hash

LEDGER_COLUMNS = (
    "timestamp",  # when the row was recorded (UTC, ISO 8601)
    "source",  # who evaluated: walk_forward, ab_sac_icm, ab_options_her, ab_reward_shaper, final_evaluation
    "symbol",
    "split",  # one of SPLITS
    "period_start",  # first and last timestamp of the evaluated returns
    "period_end",
    "agent",
    "config_hash",  # provenance.config_hash(configuration)
    "config",  # the configuration as JSON (sorted keys)
    "n_runs",  # runs pooled into the row (seeds × folds)
    *MOMENT_KEYS,  # of the pooled per-period returns: n_obs, mean, std (ddof=1), skew, kurtosis (plain)
    "sharpe",  # per-period (mean / std), what DSR works on
    "sharpe_annualised",
    "save_version",  # the Kedro run's save version, or None outside Kedro
    "git_commit",
    "config_env",  # the run's Kedro config env (local, ci, gpu, ...); None outside Kedro or in older files
    "repeat",  # True for a deliberate repeated final evaluation (final_evaluation.allow_repeat)
)
SPLITS = ("validation", "walk_forward", "test")
# Columns added after ledger files were written: an older file reads them as missing (None).
LATER_COLUMNS = ("config_env",)
REQUIRED_VALUES = ("timestamp", "source", "symbol", "split", "agent", "config_hash", "config")
FILE_SUFFIX = ".parquet"


def trial_row(
    *,
    source: str,
    symbol: str,
    split: str,
    period_start: str,
    period_end: str,
    agent: str,
    configuration: Mapping[str, Any],
    moments: Mapping[str, Any],
    n_runs: int,
    periods_per_year: float | None,
    run: Mapping[str, Any] | None = None,
    repeat: bool = False,
) -> dict[str, Any]:
    """One ledger row; ``moments`` as ``metrics.return_moments``/``pool_moments`` give them."""
    run = dict(run or {})
    sharpe = sharpe_from_moments(moments)
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="microseconds"),
        "source": source,
        "symbol": symbol,
        "split": split,
        "period_start": str(period_start),
        "period_end": str(period_end),
        "agent": agent,
        "config_hash": config_hash(dict(configuration)),
        "config": json.dumps(configuration, sort_keys=True, default=str),
        "n_runs": int(n_runs),
        **{key: math.nan if moments[key] is None else moments[key] for key in MOMENT_KEYS},
        "sharpe": sharpe,
        "sharpe_annualised": sharpe * math.sqrt(periods_per_year) if periods_per_year else math.nan,
        "save_version": None if run.get("save_version") is None else str(run["save_version"]),
        "git_commit": None if run.get("git_commit") is None else str(run["git_commit"]),
        "config_env": None if run.get("config_env") is None else str(run["config_env"]),
        "repeat": bool(repeat),
    }


def empty_ledger() -> pd.DataFrame:
    return pd.DataFrame(columns=list(LEDGER_COLUMNS))


def validate_rows(rows: pd.DataFrame | Iterable[Mapping[str, Any]], where: str = "trial ledger rows") -> pd.DataFrame:
    """The rows as a frame with exactly ``LEDGER_COLUMNS``; errors name the column and ``where``."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if frame.empty and not len(frame.columns):
        return empty_ledger()
    missing = [column for column in LEDGER_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"{where} lack column(s) {missing}; a ledger row has {list(LEDGER_COLUMNS)}")
    extra = [column for column in frame.columns if column not in LEDGER_COLUMNS]
    if extra:
        raise ValueError(f"{where} have unknown column(s) {extra}; a ledger row has {list(LEDGER_COLUMNS)}")
    for column in REQUIRED_VALUES:
        if frame[column].isna().any():
            raise ValueError(f"{where}: column '{column}' has missing values")
    bad_splits = sorted(set(frame["split"]) - set(SPLITS))
    if bad_splits:
        raise ValueError(f"{where}: column 'split' has {bad_splits}; allowed: {list(SPLITS)}")
    return frame[list(LEDGER_COLUMNS)].reset_index(drop=True)


def new_file_name() -> str:
    """``<UTC timestamp>-<short uuid>.parquet``: names sort in the order they were made."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:8]}{FILE_SUFFIX}"


def append_rows(folder: str | Path, rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> Path | None:
    """Write ``rows`` as a new immutable file in ``folder`` and return its path (``None``, and no
    file, when there are no rows). An existing file is never replaced: if the new name is taken the
    append fails."""
    frame = validate_rows(rows)
    if frame.empty:
        return None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / new_file_name()
    staging = folder / f".{target.name}.{uuid.uuid4().hex}.tmp"
    frame.to_parquet(staging, index=False)
    try:
        os.link(staging, target)  # atomic, and unlike a rename it refuses an existing target
    except FileExistsError:
        raise FileExistsError(
            f"trial ledger file {target} already exists; ledger files are never overwritten"
        ) from None
    finally:
        staging.unlink()
    return target


def current_configuration(configuration: Any) -> Any:
    """A recorded configuration under today's parameter names: ``reward: {scale: x}`` is now
    ``reward_scale: x`` and ``collapse.hold_threshold`` is gone (the env's own value is read).
    Without this a renamed key would make an old configuration a new trial and re-open the test split
    it already spent (docs/configuration.md, "Renamed keys")."""
    if isinstance(configuration, list):
        return [current_configuration(value) for value in configuration]
    if not isinstance(configuration, dict):
        return configuration
    current: dict[str, Any] = {}
    for key, value in configuration.items():
        if key == "reward" and isinstance(value, dict) and set(value) == {"scale"}:
            current["reward_scale"] = value["scale"]
        elif key == "collapse" and isinstance(value, dict):
            current[key] = {
                name: current_configuration(item) for name, item in value.items() if name != "hold_threshold"
            }
        else:
            current[key] = current_configuration(value)
    return current


def _with_current_identities(ledger: pd.DataFrame) -> pd.DataFrame:
    """Rows recorded under superseded parameter names get the configuration and hash they have under
    today's names; every other row keeps its stored hash (never re-hashed from its JSON)."""
    configs, hashes = ledger["config"].tolist(), ledger["config_hash"].tolist()
    for i, text in enumerate(configs):
        recorded = json.loads(text)
        current = current_configuration(recorded)
        if current != recorded:
            configs[i] = json.dumps(current, sort_keys=True, default=str)
            hashes[i] = config_hash(current)
    return ledger.assign(config=configs, config_hash=hashes)


def _with_later_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """A file written before a ``LATER_COLUMNS`` column existed, with that column as None."""
    return frame.assign(**{column: None for column in LATER_COLUMNS if column not in frame.columns})


def read_ledger(folder: str | Path) -> pd.DataFrame:
    """Every row of every ledger file in ``folder``, oldest file first (empty frame when none), with
    configurations recorded under superseded parameter names identified as they are today."""
    folder = Path(folder)
    files = sorted(folder.glob(f"*{FILE_SUFFIX}")) if folder.is_dir() else []
    if not files:
        return empty_ledger()
    frames = [
        validate_rows(_with_later_columns(pd.read_parquet(file)), where=f"trial ledger file {file}") for file in files
    ]
    return _with_current_identities(pd.concat(frames, ignore_index=True))


@dataclass(frozen=True)
class Trials:
    """The configurations tried for a symbol: their per-period Sharpes and where they came from."""

    sharpes: tuple[float, ...]
    by_source: dict[str, int]

    @property
    def n(self) -> int:
        return len(self.sharpes)


def trials_for(ledger: pd.DataFrame, symbol: str) -> Trials:
    """The trials DSR counts for ``symbol``: one per configuration hash (its latest row) among the
    rows that are not test-split evaluations (those select nothing). An undefined Sharpe (the
    configuration never traded) counts as 0 rather than being dropped."""
    rows = ledger[(ledger["symbol"] == symbol) & (ledger["split"] != "test")]
    rows = rows.drop_duplicates("config_hash", keep="last")
    sharpes = rows["sharpe"].astype(float).replace([np.inf, -np.inf], np.nan).fillna(0.0)
    return Trials(
        tuple(float(value) for value in sharpes),
        {str(k): int(v) for k, v in rows["source"].value_counts(sort=False).items()},
    )


def deflated_sharpe(moments: Mapping[str, Any], trials: Trials) -> float:
    """DSR of a series known by its moments against ``trials``; ``nan`` with fewer than 2 trials."""
    if trials.n < 2:
        return math.nan
    return psr_from_moments(moments, sr_benchmark=expected_max_sharpe(trials.sharpes))


def earlier_evaluations(ledger: pd.DataFrame, configuration_hash: str, source: str, split: str) -> pd.DataFrame:
    """Rows of ``ledger`` from ``source`` on ``split`` for the configuration ``configuration_hash``."""
    return ledger[
        (ledger["source"] == source) & (ledger["split"] == split) & (ledger["config_hash"] == configuration_hash)
    ]
