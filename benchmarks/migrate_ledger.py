"""Give the rows of a trial ledger recorded before configuration identities (algorithm version 0)
today's identity, once (docs/protocol.md, "Identity").

    python benchmarks/migrate_ledger.py --source docs/results/trial_ledger --target /tmp/migrated

Per row, under today's parameter names (``ledger.current_configuration``):

- the random streams move under ``streams``: the base ``seed``, the ``seeds`` (count or list) and, for
  walk-forward rows, the agent's stream, which was its index in ``walk_forward.agents``; a run's
  rows were written in that order, so the stream is the row's position among its file's rows of the
  symbol (a re-roll of the same configuration, not a new trial, when it differs from 0);
- agent parameters are reduced to what acts (``walk_forward.identity_params``: run-time keys and
  switched-off sections dropped, ``sac``'s ICM off); env configs likewise (``EnvConfig``); the
  walk-forward protocol loses ``device`` and ``seeds``;
- ``algorithm_version: "0+<commit>"``: the code before versioning, told apart by the row's git commit
  (conservative: a commit that changed no behaviour still counts as another version, so trials are
  never merged across a code change such as the ICM normalisation);
- ``period_start`` of rows that recorded their split's or window's first bar (learning curve, A/B
  scripts) becomes the first bar of the evaluated returns, the next bar of the symbol, as the
  walk-forward and final_evaluation rows record it; rows of one period then compare in one DSR.

Each source file becomes a file of the same name in ``--target``; the hash of every row is
recomputed from its migrated configuration. Rows that already carry an ``algorithm_version`` are
copied unchanged.
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from trading_rl.data import load_prices
from trading_rl.envs.continuous import EnvConfig
from trading_rl.evaluation.ledger.ledger import (
    FILE_SUFFIX,
    STREAMS,
    current_configuration,
    read_ledger_file,
    validate_rows,
)
from trading_rl.phases.walk_forward import identity_params
from trading_rl.phases.walk_forward.trainers import AGENT_PARAMS_SOURCE, OVERRIDDEN_AGENT_PARAMS
from trading_rl.provenance import identity_hash
from trading_rl.training.params import AgentParams

PROJECT_ROOT = Path(__file__).resolve().parents[1]

LEGACY_ALGORITHM_VERSION = "0+{commit}"
# Sources whose rows recorded the first bar of the split or window, not of the evaluated returns.
FIRST_BAR_SOURCES = ("learning_curve", "ab_sac_icm", "ab_options_her", "ab_reward_shaper")


def _streams(configuration: dict[str, Any], agent_stream: int | None) -> dict[str, Any]:
    streams = {key: configuration.pop(key) for key in ("seed", "seeds") if key in configuration}
    protocol = configuration.get("walk_forward")
    if isinstance(protocol, dict):
        protocol.pop("device", None)
        if "seeds" in protocol:
            streams["seeds"] = protocol.pop("seeds")
    if agent_stream is not None:
        streams["agent_stream"] = agent_stream
    return streams


@functools.cache
def _legacy_agent_defaults() -> AgentParams:
    """The agent defaults the rows were recorded under (algorithm versions 0 and 1): conf/seeds'
    agent, which states the defaults that changed on 2026-12-06, over today's code defaults."""
    seeds = yaml.safe_load((PROJECT_ROOT / "conf" / "seeds" / "parameters_sac_icm.yml").read_text())
    return AgentParams.from_mapping(seeds["sac_icm"]["agent"], "sac_icm.agent")


def _identity(agent: str, params: dict[str, Any]) -> dict[str, Any]:
    """``identity_params`` of a recorded section (the SAC family's as ``AgentParams``, its unwritten
    keys at the defaults of its time)."""
    if AGENT_PARAMS_SOURCE.get(agent, agent) in OVERRIDDEN_AGENT_PARAMS:
        return identity_params(agent, _legacy_agent_defaults().overlay(params, "sac_icm.agent"))
    return identity_params(agent, params)


def migrated_configuration(
    configuration: dict[str, Any], source: str, agent_stream: int | None, commit: str | None
) -> dict[str, Any]:
    """``configuration`` (recorded before algorithm versions, at ``commit``) as today's identity reads it."""
    configuration = current_configuration(configuration)
    streams = _streams(configuration, agent_stream)
    agent = str(configuration.get("agent", ""))
    if isinstance(configuration.get("agent_params"), dict):
        configuration["agent_params"] = _identity(agent or "sac_icm", configuration["agent_params"])
    if source == "learning_curve" and isinstance(configuration.get("agent"), dict):
        configuration["agent"] = _identity("sac_icm", configuration["agent"])
    if isinstance(configuration.get("env"), dict):
        configuration["env"] = EnvConfig.identity_view(configuration["env"])
    version = LEGACY_ALGORITHM_VERSION.format(commit=(commit or "unknown")[:7])
    return {**configuration, "algorithm_version": version, STREAMS: streams}


def _next_bar(symbol: str, day: str, cache: dict[str, pd.DatetimeIndex]) -> str:
    if symbol not in cache:
        cache[symbol] = load_prices(symbol).index
    index = cache[symbol]
    return index[index > pd.Timestamp(day)][0].date().isoformat()


def migrate_rows(rows: pd.DataFrame, bars: dict[str, pd.DatetimeIndex] | None = None) -> pd.DataFrame:
    """One ledger file's rows with today's identities (see the module doc)."""
    bars = {} if bars is None else bars
    rows = validate_rows(rows).copy()
    position: dict[tuple[str, str], int] = {}
    for i, row in rows.iterrows():
        recorded = json.loads(row["config"])
        if "algorithm_version" in recorded:
            continue
        stream = None
        if row["source"] == "walk_forward":
            key = (row["source"], row["symbol"])
            stream = position.get(key, 0)
            position[key] = stream + 1
        configuration = migrated_configuration(recorded, row["source"], stream, row["git_commit"])
        rows.at[i, "config"] = json.dumps(configuration, sort_keys=True, default=str)
        rows.at[i, "config_hash"] = identity_hash(configuration)
        if row["source"] in FIRST_BAR_SOURCES:
            rows.at[i, "period_start"] = _next_bar(row["symbol"], row["period_start"], bars)
    return rows


def migrate_file(file: Path, bars: dict[str, pd.DatetimeIndex] | None = None) -> pd.DataFrame:
    """``migrate_rows`` of one ledger file, read as the ledger reads it: checked, and with the columns
    added since it was written (``LATER_COLUMNS``) as None."""
    return migrate_rows(read_ledger_file(file), bars)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="ledger folder to migrate")
    parser.add_argument("--target", required=True, help="new folder for the migrated files (must not exist)")
    args = parser.parse_args()
    source, target = Path(args.source), Path(args.target)
    target.mkdir(parents=True)
    bars: dict[str, pd.DatetimeIndex] = {}
    for file in sorted(source.glob(f"*{FILE_SUFFIX}")):
        migrate_file(file, bars).to_parquet(target / file.name, index=False)
        print(f"{file.name}: migrated")


if __name__ == "__main__":
    main()
