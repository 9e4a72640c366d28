"""The trial ledger: every configuration evaluated on a period, one row each, appended, never rewritten.

A row is one configuration (agent + the parameters that act, its random streams under ``streams``
and the algorithm version, hashed with ``provenance.identity_hash``) evaluated once on one period of
one symbol, with the moments of its pooled out-of-sample returns (all its runs: seeds × folds). The
ledger is what the Deflated Sharpe Ratio counts: the number of configurations tried for a symbol on
one period (re-rolls pooled, ``trials_for``) and the spread of their per-period Sharpe ratios
(Bailey & López de Prado 2014), and what ``final_evaluation`` checks before it spends the test split.

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

from trading_rl.evaluation.metrics.metrics import (
    MOMENT_KEYS,
    expected_max_sharpe,
    pool_moments,
    psr_from_moments,
    sharpe_from_moments,
)
from trading_rl.provenance import ALGORITHM_VERSION, identity_hash

LEDGER_COLUMNS = (
    "timestamp",  # when the row was recorded (UTC, ISO 8601)
    "source",  # who evaluated: walk_forward, ab_sac_icm, ab_options_her, ab_reward_shaper, final_evaluation
    "symbol",
    "split",  # one of SPLITS
    "period_start",  # first and last timestamp of the evaluated returns
    "period_end",
    "agent",
    "config_hash",  # provenance.identity_hash(configuration)
    "config",  # the configuration as JSON (sorted keys)
    "n_runs",  # runs pooled into the row (seeds × folds)
    *MOMENT_KEYS,  # of the pooled per-period returns: n_obs, mean, std (ddof=1), skew, kurtosis (plain)
    "sharpe",  # per-period (mean / std), what DSR works on
    "sharpe_annualised",
    "save_version",  # the Kedro run's save version, or None outside Kedro
    "git_commit",
    "config_env",  # the run's Kedro config env (local, ci, gpu, ...); None outside Kedro or in older files
    "repeat",  # True for a deliberate repeated final evaluation (final_evaluation.allow_repeat)
    "state",  # how the evaluation ended: one of TRIAL_STATES; None in files written before the column
)
# Additive columns: the return attribution of the row's returns against the market line
# (evaluation.metrics.attribution; walk-forward rows: the median over seeds' stitched series). Rows from
# files written before they existed read as NaN, as do rows whose source does not attribute (tuning).
ATTRIBUTION_COLUMNS = (
    "alpha_annual",
    "alpha_ci90_low",
    "alpha_ci90_high",
    "alpha_t",
    "beta",
    "mean_exposure",
    "exposure_matched_sharpe",
)
ALL_COLUMNS = (*LEDGER_COLUMNS, *ATTRIBUTION_COLUMNS)
SPLITS = ("validation", "walk_forward", "test")
# The key of a configuration that holds what sets its random streams (seeds, the stream index);
# rows that differ only there are re-rolls of one trial (``trial_key``).
STREAMS = "streams"
# Columns added after ledger files were written: an older file reads them as missing (None).
LATER_COLUMNS = ("config_env", "state")
# ``complete``: every run of the configuration; ``pruned``: stopped early by the tuning pruner, the
# moments of the runs it did; ``fail``: it raised, no moments. Each is a configuration tried.
TRIAL_STATES = ("complete", "pruned", "fail")
REQUIRED_VALUES = ("timestamp", "source", "symbol", "split", "agent", "config_hash", "config")
FILE_SUFFIX = ".parquet"
NUMERIC_COLUMNS = ("n_runs", *MOMENT_KEYS, "sharpe", "sharpe_annualised")
STALE_STAGING_S = 3600.0  # an append's staging file older than this was left by a killed process


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
    attribution: Mapping[str, Any] | None = None,
    state: str = "complete",
) -> dict[str, Any]:
    """One ledger row; ``moments`` as ``metrics.return_moments``/``pool_moments`` give them,
    ``attribution`` a mapping with the ``ATTRIBUTION_COLUMNS`` (``None`` values, or none given: NaN),
    ``state`` one of ``TRIAL_STATES``."""
    run = dict(run or {})
    attribution = dict(attribution or {})
    configuration = identified(configuration)
    sharpe = sharpe_from_moments(moments)
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="microseconds"),
        "source": source,
        "symbol": symbol,
        "split": split,
        "period_start": str(period_start),
        "period_end": str(period_end),
        "agent": agent,
        "config_hash": identity_hash(dict(configuration)),
        "config": json.dumps(configuration, sort_keys=True, default=str),
        "n_runs": int(n_runs),
        **{key: math.nan if moments[key] is None else moments[key] for key in MOMENT_KEYS},
        "sharpe": sharpe,
        "sharpe_annualised": sharpe * math.sqrt(periods_per_year) if periods_per_year else math.nan,
        "save_version": None if run.get("save_version") is None else str(run["save_version"]),
        "git_commit": None if run.get("git_commit") is None else str(run["git_commit"]),
        "config_env": None if run.get("config_env") is None else str(run["config_env"]),
        "repeat": bool(repeat),
        "state": state,
        **{key: math.nan if attribution.get(key) is None else float(attribution[key]) for key in ATTRIBUTION_COLUMNS},
    }


def identified(configuration: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration with the algorithm version it ran under (``provenance.ALGORITHM_VERSION``
    unless recorded): what a row records and ``provenance.identity_hash`` hashes."""
    return {"algorithm_version": ALGORITHM_VERSION, **configuration}


def empty_ledger() -> pd.DataFrame:
    return pd.DataFrame(columns=list(ALL_COLUMNS))


def validate_rows(rows: pd.DataFrame | Iterable[Mapping[str, Any]], where: str = "trial ledger rows") -> pd.DataFrame:
    """The rows as a frame with exactly ``ALL_COLUMNS`` (``ATTRIBUTION_COLUMNS`` it lacks added as
    NaN); errors name the column and ``where``."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if frame.empty and not len(frame.columns):
        return empty_ledger()
    missing = [column for column in LEDGER_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"{where} lack column(s) {missing}; a ledger row has {list(LEDGER_COLUMNS)}")
    extra = [column for column in frame.columns if column not in ALL_COLUMNS]
    if extra:
        raise ValueError(f"{where} have unknown column(s) {extra}; a ledger row has {list(ALL_COLUMNS)}")
    frame = frame.assign(**{column: math.nan for column in ATTRIBUTION_COLUMNS if column not in frame.columns})
    for column in REQUIRED_VALUES:
        if frame[column].isna().any():
            raise ValueError(f"{where}: column '{column}' has missing values")
    bad_splits = sorted(set(frame["split"]) - set(SPLITS))
    if bad_splits:
        raise ValueError(f"{where}: column 'split' has {bad_splits}; allowed: {list(SPLITS)}")
    bad_states = sorted(set(frame["state"].dropna()) - set(TRIAL_STATES))
    if bad_states:
        raise ValueError(f"{where}: column 'state' has {bad_states}; allowed: {list(TRIAL_STATES)} or null")
    return frame[list(ALL_COLUMNS)].reset_index(drop=True)


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
            hashes[i] = identity_hash(current)
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
    frames = [read_ledger_file(file) for file in files]
    return _with_current_identities(pd.concat(frames, ignore_index=True))


def read_ledgers(folders: Iterable[str | Path]) -> pd.DataFrame:
    """The rows of several ledger folders (the project's and the committed one), a row present in
    more than one (the same timestamp, source, symbol, agent and identity) once."""
    frames = [read_ledger(folder) for folder in folders]
    rows = pd.concat([frame for frame in frames if not frame.empty] or [empty_ledger()], ignore_index=True)
    return rows.drop_duplicates(["timestamp", "source", "symbol", "agent", "config_hash"]).reset_index(drop=True)


@dataclass(frozen=True)
class Period:
    """The evaluated bars of a row: its first and last date. Trials enter one DSR only when they were
    evaluated on the same period, else the variance of their Sharpe ratios measures differences
    between market periods as much as between configurations."""

    start: str
    end: str

    @classmethod
    def of(cls, start: Any, end: Any) -> Period:
        return cls(pd.Timestamp(start).date().isoformat(), pd.Timestamp(end).date().isoformat())

    def __str__(self) -> str:
        return f"{self.start} → {self.end}"


class LedgerFileError(ValueError):
    """A trial ledger file is empty, not parquet, or not ledger rows; the message names it and the fix."""


def read_ledger_file(file: Path) -> pd.DataFrame:
    """One ledger file's rows, checked against the ledger schema (columns, required values, splits,
    numbers where numbers belong). A file that fails is refused, never skipped: its trials count
    towards the DSR and the test-split check."""
    fix = (
        f"Nothing was written. Fix: restore the file from a copy, or, if its rows are lost, move it out of the "
        f"ledger (`mv {file} {file}.unreadable`: only *{FILE_SUFFIX} files are read); its trials then no longer "
        "count towards the DSR and the test-split check"
    )
    if file.stat().st_size == 0:
        raise LedgerFileError(f"trial ledger file {file} is empty (0 bytes). {fix}")
    try:
        frame = pd.read_parquet(file)
    except Exception as exc:  # pyarrow's errors on foreign bytes name a buffer, not the file
        raise LedgerFileError(f"trial ledger file {file} is not a readable parquet table ({exc}). {fix}") from exc
    try:
        frame = validate_rows(_with_later_columns(frame), where=f"trial ledger file {file}")
    except ValueError as exc:
        raise LedgerFileError(f"{exc}. {fix}") from exc
    for column in NUMERIC_COLUMNS:
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna() & frame[column].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise LedgerFileError(
                f"trial ledger file {file}: column '{column}' holds {frame[column].iloc[row]!r} at row {row}, not a "
                f"number. {fix}"
            )
        frame[column] = values
    return frame


def sweep_stale_staging(folder: str | Path, older_than_s: float = STALE_STAGING_S) -> list[Path]:
    """Remove the hidden ``.<name>.tmp`` staging files that appends killed between writing and
    linking left behind, once older than ``older_than_s`` (a live append links within milliseconds).
    Returns the removed paths."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    now = datetime.now(UTC).timestamp()
    removed = []
    for staging in folder.glob(f".*{FILE_SUFFIX}.*.tmp"):
        try:
            if now - staging.stat().st_mtime > older_than_s:
                staging.unlink()
                removed.append(staging)
        except FileNotFoundError:  # another sweeper took it
            continue
    return removed


@dataclass(frozen=True)
class Trials:
    """The configurations tried for a symbol on one period: their per-period Sharpes and where they
    came from."""

    sharpes: tuple[float, ...]
    by_source: dict[str, int]
    period: Period | None = None

    @property
    def n(self) -> int:
        return len(self.sharpes)

    @property
    def variance(self) -> float:
        """V of the DSR: the variance of the trials' per-period Sharpe ratios (``nan`` below 2)."""
        return float(np.var(self.sharpes, ddof=1)) if self.n >= 2 else math.nan

    def describe(self) -> dict[str, Any]:
        """What a report states about the trials its DSR counted: period, N, V, sources."""
        return {
            "period": None if self.period is None else {"start": self.period.start, "end": self.period.end},
            "n_trials": self.n,
            "variance": None if math.isnan(self.variance) else self.variance,
            "by_source": self.by_source,
        }


def trial_key(configuration_json: str) -> str:
    """What a trial is: the hash of its configuration without its random streams (``STREAMS``), so
    that re-rolls of one configuration with other seeds are one trial."""
    configuration = json.loads(configuration_json)
    configuration.pop(STREAMS, None)
    return identity_hash(configuration)


def _pooled_sharpe(rows: pd.DataFrame) -> float:
    """Sharpe of the pooled returns of a configuration's rows (its re-rolls); 0 when undefined."""
    parts = [row for row in rows[list(MOMENT_KEYS)].to_dict("records") if np.isfinite(row["n_obs"] or np.nan)]
    if not parts:
        return 0.0
    sharpe = sharpe_from_moments(pool_moments(parts))
    return float(sharpe) if np.isfinite(sharpe) else 0.0


def trials_for(ledger: pd.DataFrame, symbol: str, period: Period) -> Trials:
    """The trials DSR counts for ``symbol`` on ``period`` (rows evaluated on other bars are left out):

    - one trial per configuration (``trial_key``): rows of one configuration with other random
      streams are re-rolls, pooled into one Sharpe; a row repeated with the same identity
      (``config_hash``) adds nothing;
    - every test-split row is a trial of its own, repeats included: each look at the test split is
      a chance to be lucky;
    - an undefined Sharpe (the configuration never traded) counts as 0 rather than being dropped."""
    rows = ledger[ledger["symbol"] == symbol]
    on_period = [Period.of(s, e) == period for s, e in zip(rows["period_start"], rows["period_end"])]
    rows = rows.loc[np.array(on_period, dtype=bool)]
    tests = rows[rows["split"] == "test"]
    others = rows[rows["split"] != "test"].drop_duplicates("config_hash", keep="last")
    keys = [trial_key(text) for text in others["config"]]
    sharpes = [_pooled_sharpe(tests.iloc[[i]]) for i in range(len(tests))]
    sources: dict[str, int] = {}
    for source in tests["source"]:
        sources[str(source)] = sources.get(str(source), 0) + 1
    for key in dict.fromkeys(keys):
        group = others.loc[np.array([k == key for k in keys], dtype=bool)]
        sharpes.append(_pooled_sharpe(group))
        sources[str(group["source"].iloc[-1])] = sources.get(str(group["source"].iloc[-1]), 0) + 1
    return Trials(tuple(sharpes), sources, period)


def deflated_sharpe(moments: Mapping[str, Any], trials: Trials) -> float:
    """DSR of a series known by its moments against ``trials``; ``nan`` with fewer than 2 trials."""
    if trials.n < 2:
        return math.nan
    return psr_from_moments(moments, sr_benchmark=expected_max_sharpe(trials.sharpes))
