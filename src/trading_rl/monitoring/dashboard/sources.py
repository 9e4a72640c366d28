"""Where the dashboard reads from (:class:`DashboardSources`) and the readers of each source.

Every reader returns its data or a :class:`SourceProblem` (``info``: nothing there yet; ``error``:
something there that is not what it should be, named with its file and the way out) and never
raises on a bad file: one broken source blanks its own panel, not the page. The readers only read;
in particular an MLflow store that does not exist is reported, not created.

Kedro-versioned outputs (``forward_record``, ``forward_report``, ``forward_drift``) are folders of
versions, ``<path>/<version>/<name>``; the newest version (the greatest, Kedro's timestamps sort)
is read. A plain file at the path is read as it is.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from trading_rl.monitoring.alerting import AlertFileError, JsonLinesChannel

# What the record panels read of a forward record row (phases.forward.record writes more).
RECORD_NEEDS: tuple[str, ...] = ("timestamp", "return", "equity", "position", "trade_value", "fees", "action_raw")
CHAMPION_ALIAS = "champion"
SQLITE_PREFIX = "sqlite:///"
PATH_FIELDS = ("record", "report", "drift", "decisions", "alerts", "prices")


@dataclass(frozen=True)
class SourceProblem:
    """Why a panel shows no data: ``level`` ``"info"`` (nothing written yet) or ``"error"`` (a file
    or store that cannot be read), and a ``message`` naming the source and what to do."""

    level: str
    message: str


@dataclass(frozen=True)
class DashboardSources:
    """The files and the registry one dashboard reads, and how often it looks at them.

    Every ``refresh_s`` the decisions and alerts panels are redrawn (a new line is on the page at
    most one period plus one redraw after it was written) and the record, report, drift and price
    files are checked: a changed one redraws the whole page. The registry is read again every
    ``registry_refresh_s`` (its store also changes with every logged metric), and a new champion or
    gate verdict redraws the page."""

    record: Path = Path("data/07_model_output/forward_record.parquet")
    report: Path = Path("data/08_reporting/forward/forward_report.json")
    drift: Path = Path("data/08_reporting/forward/forward_drift.json")
    decisions: Path = Path("data/08_reporting/serving/decisions.jsonl")
    alerts: Path = Path("data/08_reporting/alerts/alerts.jsonl")
    prices: Path = Path("data/01_raw/prices")
    tracking_uri: str = "sqlite:///mlflow.db"
    registered_models: tuple[str, ...] = ("trading_rl_sac_icm",)
    alias: str = CHAMPION_ALIAS
    refresh_s: float = 0.5
    registry_refresh_s: float = 5.0
    sharpe_window: int = 63
    hold_threshold: float = 0.1
    recent_rows: int = 20

    def __post_init__(self) -> None:
        for name in PATH_FIELDS:  # text from the configuration or the command line
            object.__setattr__(self, name, Path(getattr(self, name)))
        if isinstance(self.registered_models, str) or not self.registered_models:
            raise ValueError(f"dashboard option 'registered_models' must name models, got {self.registered_models!r}")
        object.__setattr__(self, "registered_models", tuple(self.registered_models))
        for name in ("refresh_s", "registry_refresh_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"dashboard option '{name}' must be > 0 seconds, got {getattr(self, name)}")
        if self.sharpe_window < 2 or self.recent_rows < 1:
            raise ValueError(
                f"dashboard options 'sharpe_window' (>= 2) and 'recent_rows' (>= 1): got {self.sharpe_window}, "
                f"{self.recent_rows}"
            )
        if not 0.0 <= self.hold_threshold < 0.5:
            raise ValueError(f"dashboard option 'hold_threshold' must be in [0, 0.5), got {self.hold_threshold}")

    def to_argv(self) -> list[str]:
        """The script arguments that :meth:`from_argv` reads back into these sources."""
        argv: list[str] = []
        for spec in fields(self):
            value = getattr(self, spec.name)
            flag = "--" + spec.name.replace("_", "-")
            if spec.name == "registered_models":
                for name in value:
                    argv += ["--registered-model", name]
            else:
                argv += [flag, str(value)]
        return argv

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> DashboardSources:
        """Sources from script arguments (``streamlit run app.py -- --record ...``); a missing option
        keeps its default, an unknown one is refused naming it."""
        parser = argparse.ArgumentParser(prog="trading_rl dashboard", exit_on_error=False, allow_abbrev=False)
        defaults = cls()
        for spec in fields(cls):
            if spec.name == "registered_models":
                continue
            default = getattr(defaults, spec.name)
            kind = type(default) if not isinstance(default, Path) else Path
            parser.add_argument("--" + spec.name.replace("_", "-"), type=kind, default=default, dest=spec.name)
        parser.add_argument("--registered-model", action="append", dest="registered_models", default=None)
        try:
            parsed, unknown = parser.parse_known_args(list(argv))
        except argparse.ArgumentError as error:
            raise ValueError(f"dashboard arguments {list(argv)}: {error}") from None
        if unknown:
            known = ", ".join(action.option_strings[0] for action in parser._actions[1:])
            raise ValueError(f"dashboard arguments: unknown {unknown}; the options are {known}")
        values = vars(parsed)
        values["registered_models"] = tuple(values["registered_models"] or defaults.registered_models)
        return cls(**values)


def stored_file(path: Path) -> tuple[Path, str | None] | None:
    """The file to read at ``path`` and its Kedro version: the newest version of a versioned
    dataset folder, or the plain file (version ``None``); ``None`` when neither exists."""
    if path.is_file():
        return path, None
    if not path.is_dir():
        return None
    versions = sorted(child.name for child in path.iterdir() if (child / path.name).is_file())
    return (path / versions[-1] / path.name, versions[-1]) if versions else None


def read_forward_record(path: Path) -> pd.DataFrame | SourceProblem:
    """The newest forward record (``attrs["version"]`` names its version), possibly without rows."""
    found = stored_file(path)
    if found is None:
        return SourceProblem(
            "info",
            f"no forward record at {path} yet: the scheduled `kedro run --pipelines forward` writes it once a "
            "model is promoted",
        )
    file, version = found
    try:
        record = pd.read_parquet(file)
    except Exception as error:  # pyarrow raises its own types for a damaged file; any of them: not readable
        return SourceProblem("error", f"the forward record {file} is not a readable parquet file ({error})")
    missing = [column for column in RECORD_NEEDS if column not in record.columns]
    if missing:
        return SourceProblem(
            "error", f"the forward record {file} lacks column(s) {missing}: it was not written by the forward pipeline"
        )
    try:
        record["timestamp"] = pd.to_datetime(record["timestamp"])
        numbers = record[list(RECORD_NEEDS[1:])].apply(pd.to_numeric)
    except (ValueError, TypeError) as error:
        return SourceProblem("error", f"the forward record {file} holds text where numbers or times belong ({error})")
    record[list(RECORD_NEEDS[1:])] = numbers
    record = record.sort_values("timestamp", kind="stable").reset_index(drop=True)
    record.attrs["version"] = version
    return record


def read_stored_json(path: Path, what: str) -> dict[str, Any] | SourceProblem:
    """The newest version of the JSON report ``what`` (e.g. "forward drift report") at ``path``."""
    found = stored_file(path)
    if found is None:
        return SourceProblem("info", f"no {what} at {path} yet: the forward pipeline writes it")
    file, version = found
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return SourceProblem("error", f"the {what} {file} is not readable JSON ({error})")
    if not isinstance(data, dict):
        return SourceProblem("error", f"the {what} {file} holds {type(data).__name__}, not a JSON object")
    return {**data, "_version": version}


def read_alerts(path: Path) -> list[dict[str, Any]] | SourceProblem:
    """Every alert of the alerts file, oldest first (``[]`` before the first one); a file that is
    not JSON lines is reported with the alerting channel's own message."""
    try:
        return JsonLinesChannel(path).read()
    except AlertFileError as error:
        return SourceProblem("error", str(error))
    except OSError as error:
        return SourceProblem("error", f"the alerts file {path} is not readable ({error})")


def read_prices_for(prices: Path, symbol: str) -> pd.Series | SourceProblem:
    """The close prices of ``symbol`` (``prices``: a price file, or the raw price folder holding
    ``<symbol>.csv|.parquet``), indexed by timestamp, for the buy-and-hold line."""
    from trading_rl.data import load_prices

    file = price_file(prices, symbol)
    if file is None:
        return SourceProblem("info", f"no buy-and-hold line: no {symbol}.csv or {symbol}.parquet in {prices}")
    try:
        frame = load_prices(symbol, source="file", path=file)
    except (OSError, ValueError) as error:
        return SourceProblem("info", f"no buy-and-hold line: the prices of {symbol} at {prices} ({error})")
    return frame["close"].astype("float64").sort_index()


def price_file(prices: Path, symbol: str) -> Path | None:
    """``prices`` itself when it is a file, else ``<prices>/<symbol>.csv|.parquet`` (``None``: neither)."""
    if prices.is_file():
        return prices
    return next(
        (prices / f"{symbol}{suffix}" for suffix in (".csv", ".parquet") if (prices / f"{symbol}{suffix}").is_file()),
        None,
    )


@dataclass(frozen=True)
class Champion:
    """What ``registered_model@alias`` deploys: ``version`` (``None``: nothing promoted), the gate
    verdicts it was registered with (``gate.<report>`` tags), who promoted it when, and ``note``
    when it could not be read."""

    registered_model: str
    alias: str
    version: int | None = None
    run_id: str | None = None
    gates: Mapping[str, str] = field(default_factory=dict)
    promoted_by: str | None = None
    promoted_at: str | None = None
    save_version: str | None = None
    note: str | None = None


def _champion(client: Any, name: str, alias: str) -> Champion:
    from mlflow.exceptions import MlflowException

    try:
        version = client.get_model_version_by_alias(name, alias)
    except MlflowException:
        return Champion(name, alias, note=f"no version of {name} carries @{alias}: `kedro run --pipelines promote`")
    tags = dict(version.tags or {})
    return Champion(
        name,
        alias,
        version=int(version.version),
        run_id=version.run_id,
        gates={key.removeprefix("gate."): value for key, value in tags.items() if key.startswith("gate.")},
        promoted_by=tags.get("promoted_by"),
        promoted_at=tags.get("promoted_at"),
        save_version=tags.get("save_version"),
    )


def read_champions(tracking_uri: str, names: Sequence[str], alias: str) -> list[Champion] | SourceProblem:
    """The ``alias`` version of each registered model in ``names``. A sqlite store that does not
    exist is reported (``info``) and left uncreated."""
    if tracking_uri.startswith(SQLITE_PREFIX):
        store = Path(tracking_uri.removeprefix(SQLITE_PREFIX))
        if not store.is_file():
            return SourceProblem("info", f"no MLflow store at {store} yet: nothing is registered")
    import mlflow

    try:
        client = mlflow.MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
        return [_champion(client, name, alias) for name in names]
    except Exception as error:  # the store's own errors (MLflow, sqlalchemy, HTTP): the panel shows them
        reason = getattr(error, "message", None) or str(error).splitlines()[0]
        return SourceProblem("error", f"the MLflow registry at {tracking_uri} is not readable ({reason})")
