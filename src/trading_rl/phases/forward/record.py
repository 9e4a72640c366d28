"""The forward record: the deployed agent's replay over every forward bar, appended to the stored
record after the replay of the stored bars reproduced them bit for bit (``extend_record``); and
``score_forward_bars``, the record as its pipeline node updates it."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
from trading_rl.phases.forward.data import ForwardData, unless_deployed
from trading_rl.phases.forward.params import ForwardParams

logger = logging.getLogger(__name__)

# What one scored bar is: compared bit for bit between reruns (``extend_record``).
SCORED_COLUMNS = ["return", "equity", "cash", "position", "trade_value", "fees", "action_raw", "action_smoothed"]
RECORD_COLUMNS = ["timestamp", *SCORED_COLUMNS, "model_version", "scored_in"]


class ForwardRecordError(ValueError):
    """The stored forward record is unreadable, lacks its schema, or disagrees with the replay of the
    same bars; nothing is appended. The message names the record version and the way back."""


def record_way_back(previous: pd.DataFrame) -> str:
    """The commands that continue without the stored record ``previous`` (no file is edited)."""
    earlier = previous.attrs.get("earlier_versions") or []
    older = (
        f"continue an older record (versions before it: {', '.join(earlier[-3:])}) with `kedro run --pipelines "
        f"forward --load-versions previous_forward_record:{earlier[-1]}`, or "
        if earlier
        else ""
    )
    return (
        f"{older}supersede it with a record replayed from the price file as it is now: `kedro run "
        "--pipelines forward --params forward.supersede_record=true` (earlier versions stay on disk)"
    )


def _record_name(previous: pd.DataFrame) -> str:
    version = previous.attrs.get("version")
    return "the stored forward record" + (f" (dataset 'previous_forward_record', version {version})" if version else "")


def check_record(previous: pd.DataFrame) -> None:
    """Raise :class:`ForwardRecordError` naming the record version when ``previous`` lacks a column
    of ``RECORD_COLUMNS``, holds text where numbers or timestamps belong, or its file was unreadable."""
    if "unreadable" in previous.attrs:
        raise ForwardRecordError(
            f"{_record_name(previous)}: {previous.attrs['unreadable']}. Nothing was written. "
            f"Fix: {record_way_back(previous)}"
        )
    missing = [column for column in RECORD_COLUMNS if column not in previous.columns]
    not_numeric = [
        column
        for column in SCORED_COLUMNS
        if column in previous.columns and not pd.api.types.is_numeric_dtype(previous[column])
    ]
    if "timestamp" in previous.columns and not pd.api.types.is_datetime64_any_dtype(previous["timestamp"]):
        not_numeric.append("timestamp")
    problems = ([f"lacks column(s) {missing}"] if missing else []) + (
        [f"holds non-numeric column(s) {not_numeric}"] if not_numeric else []
    )
    if problems:
        raise ForwardRecordError(
            f"{_record_name(previous)} {' and '.join(problems)}: it was edited or written by something else. "
            f"Nothing was written. Fix: {record_way_back(previous)}"
        )


def empty_record() -> pd.DataFrame:
    return pd.DataFrame(
        {column: pd.Series(dtype="datetime64[ns]" if column == "timestamp" else "float64") for column in RECORD_COLUMNS}
    ).astype({"model_version": "object", "scored_in": "object"})


def replay(model: Any, data: ForwardData) -> pd.DataFrame:
    """The agent's deterministic run over every forward bar (one row per bar after the data end)."""
    rollout = run_episode(data.make_env(), policy_from_sb3(model, deterministic=True))
    rollout["timestamp"] = pd.to_datetime(rollout["timestamp"])
    return rollout


def _first_difference(stored: pd.DataFrame, replayed: pd.DataFrame) -> str | None:
    stamps_differ = stored["timestamp"].to_numpy() != replayed["timestamp"].to_numpy()
    if stamps_differ.any():
        row = int(np.argmax(stamps_differ))
        return f"bar {row}: stored {stored['timestamp'].iloc[row]}, replayed {replayed['timestamp'].iloc[row]}"
    for column in SCORED_COLUMNS:
        old = stored[column].to_numpy(dtype=np.float64)
        new = replayed[column].to_numpy(dtype=np.float64)
        differs = ~((old == new) | (np.isnan(old) & np.isnan(new)))
        if differs.any():
            row = int(np.argmax(differs))
            stamp = stored["timestamp"].iloc[row]
            return f"{stamp} column '{column}': stored {float(old[row])!r}, replayed {float(new[row])!r}"
    return None


def extend_record(
    previous: pd.DataFrame | None,
    replayed: pd.DataFrame,
    model_version: str,
    run_version: str,
    supersede: bool = False,
) -> tuple[pd.DataFrame, int]:
    """``previous`` (same model) plus the replayed bars it lacks, each tagged ``scored_in``
    ``run_version``; returns ``(record, new bars)``. A previous record of another model, or any with
    ``supersede``, is not continued: the replay starts a new record. Raises ``ForwardRecordError``
    when ``previous`` fails :func:`check_record`, or the replay of the stored bars differs from them
    in any bit, or has fewer bars."""
    rows = replayed.reindex(columns=["timestamp", *SCORED_COLUMNS]).assign(
        model_version=model_version, scored_in=run_version
    )
    if previous is not None and not supersede:
        check_record(previous)
    if supersede or previous is None or previous.empty or (previous["model_version"] != model_version).any():
        return rows.reset_index(drop=True), len(rows)
    name, way_back = _record_name(previous), record_way_back(previous)
    stored = previous.reset_index(drop=True)
    if len(stored) > len(rows):
        raise ForwardRecordError(
            f"{name} of model {model_version} has {len(stored)} bars up to {stored['timestamp'].iloc[-1]}, the "
            f"price file gives only {len(rows)}: bars were removed from the file. Nothing was written. "
            f"Fix: restore the file, or {way_back}"
        )
    difference = _first_difference(stored, rows.iloc[: len(stored)].reset_index(drop=True))
    if difference is not None:
        raise ForwardRecordError(
            f"replaying model {model_version} does not reproduce {name} at {difference}: the record was edited, or "
            "the price file's past bars, the features or the env changed since they were scored. Nothing was "
            f"written. Fix: if the record is wrong (it scored bars that were later corrected), {way_back}; if the "
            "price file is wrong, restore its bars"
        )
    record = pd.concat([stored, rows.iloc[len(stored) :]], ignore_index=True)
    return record, len(rows) - len(stored)


@unless_deployed(lambda previous_record, **_: empty_record() if previous_record is None else previous_record)
def score_forward_bars(
    deployed_model: Any,
    data: ForwardData,
    previous_record: pd.DataFrame | None,
    run_metadata: dict[str, Any],
    params: ForwardParams,
) -> pd.DataFrame:
    """The previous record plus every forward bar it lacks (``extend_record``); with
    ``forward.supersede_record`` the replay replaces it."""
    replayed = replay(deployed_model, data) if data.has_new_bars else empty_record()
    record, new_bars = extend_record(
        previous_record,
        replayed,
        data.deployment.model_version,
        str(run_metadata["save_version"]),
        supersede=params.supersede_record,
    )
    if record.empty:
        logger.info("forward: no bar after the deployed model's data end %s yet", data.deployment.data_end)
        return record
    logger.info(
        "forward: %d new bar(s) scored; the record of model %s holds %d bars up to %s",
        new_bars,
        data.deployment.model_version,
        len(record),
        record["timestamp"].iloc[-1],
    )
    return record
