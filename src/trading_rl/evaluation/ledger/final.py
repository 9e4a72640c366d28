"""Spending the test split once: the final evaluation of one trained artefact.

What is spent is bound to what is evaluated: the model's weights (``model_digest``) and the
configuration the model recorded when it was trained (``trained_configuration``, stored in its
``trading_rl_metadata``). Before anything is evaluated or written:

- the run's own parameters must describe the loaded model (``configuration_disagreement``), else the
  run is refused naming the keys that differ: a report cannot claim a learning rate the model was
  not trained with, and ``--params seed=43`` cannot pass the same model off as another configuration;
- the trial ledger (the project's own and the committed one under ``docs/results/``) must hold no
  test-split row of the same weights or of the same configuration, and the claim markers must hold
  none either (``claim_test_split``: one exclusive file per artefact and per configuration, so two
  concurrent runs cannot both spend it), unless ``final_evaluation.allow_repeat`` is true; a repeat
  is evaluated and recorded with ``repeat: true``. Every test row, repeats included, is a trial of
  the test-split DSR (``ledger.trials_for``).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.config import Section, setting
from trading_rl.envs.compatibility import check_model_fits_spec, check_spec_symbol, model_metadata
from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.evaluation.ledger.ledger import (
    STREAMS,
    Period,
    Trials,
    deflated_sharpe,
    identified,
    trial_row,
    trials_for,
)
from trading_rl.evaluation.metrics.metrics import json_ready
from trading_rl.evaluation.metrics.report import evaluate_policy
from trading_rl.evaluation.metrics.rollout import policy_from_sb3
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.monitoring.collapse import CollapseThresholds
from trading_rl.provenance import canonical, identity_hash

PARAMS_PREFIX = "final_evaluation"
FINAL_LEDGER_SOURCE = "final_evaluation"
SPLIT = "test"
SUPPORTED_AGENTS = ("sac_icm",)  # catalog model: <agent>_model
ARTIFACT = "artifact"  # the configuration key of the evaluated weights' digest
CONFIGURATION_METADATA = "configuration"  # the model's trading_rl_metadata key of trained_configuration


@dataclass(frozen=True, kw_only=True)
class FinalEvaluationParams(Section):
    """The ``final_evaluation`` section. ``agent``: the trained model evaluated on the test split
    (``sac_icm``: the catalog's ``sac_icm_model``, trained with ``params:sac_icm`` on
    ``env_construction.symbol``). ``allow_repeat``: the test split is spent once per configuration,
    so a second evaluation of the same configuration hash is refused unless this is true."""

    agent: str = setting("sac_icm", choices=SUPPORTED_AGENTS)
    allow_repeat: bool = False


class SpentTestSplitError(RuntimeError):
    """The artefact or its configuration was already evaluated on the test split."""


def trained_configuration(
    agent: str,
    agent_params: Mapping[str, Any],
    env_construction: EnvConstructionParams,
    feature_extraction: FeatureExtractionParams,
    seed: int,
) -> dict[str, Any]:
    """What defines a trained agent, as its identity hashes it: the agent and its parameters as they
    act (``agent_params``: the caller's identity view, run-time keys dropped), the symbol, the env
    config and periods per year, the features, scaler and split dates, the algorithm version, and
    the seed (its random stream). The feature symbol list, other phases' budgets and run-time
    settings (device, progress bar, resume) are not part of it; the sections count as they act
    (``Section.identity``). Recorded in the model when it is trained and rebuilt from the run's
    parameters when it is evaluated."""
    return identified(
        {
            "agent": agent,
            "agent_params": dict(agent_params),
            "symbol": env_construction.symbol,
            "env": env_construction.env.identity(),
            "periods_per_year": env_construction.periods_per_year,
            "features": {key: getattr(feature_extraction, key).identity() for key in ("features", "scaler", "splits")},
            STREAMS: {"seed": seed},
        }
    )


def model_digest(model: Any) -> str:
    """sha256 of the policy's weights (names, shapes and bytes, in name order): the artefact a test
    evaluation spends, whatever its file or save version."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.policy.state_dict().items()):
        array = tensor.detach().cpu().numpy()
        digest.update(f"{name}:{array.dtype}:{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:32]


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat or {prefix: {}}
    return {prefix: value}


def configuration_disagreement(recorded: Mapping[str, Any], run: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose value differs between the model's recorded configuration and the run's, as
    identities compare them (``provenance.canonical``)."""
    left, right = (_flat(canonical(json.loads(json.dumps(side, default=str)))) for side in (recorded, run))
    return sorted(key for key in set(left) | set(right) if left.get(key, "<absent>") != right.get(key, "<absent>"))


def evaluated_configuration(model: Any, run_configuration: Mapping[str, Any], model_dataset: str) -> dict[str, Any]:
    """The configuration a test row records: the model's own recorded one plus its weights' digest.
    ``ValueError`` naming the dataset when the model recorded none (trained before models carried
    it) or when the run's parameters disagree with it, naming the keys."""
    metadata = model_metadata(model)
    recorded = metadata.get(CONFIGURATION_METADATA)
    if not recorded:
        raise ValueError(
            f"dataset '{model_dataset}' (save version {metadata.get('save_version')}) carries no recorded "
            "training configuration (trained before models recorded it): what would be spent cannot be "
            "identified; retrain it with `kedro run --pipelines sac_icm`"
        )
    # The algorithm version is the model's own (the code that trained it), not a run parameter.
    differing = [key for key in configuration_disagreement(recorded, run_configuration) if key != "algorithm_version"]
    if differing:
        raise ValueError(
            f"the parameters of this run disagree with the configuration dataset '{model_dataset}' "
            f"(save version {metadata.get('save_version')}) was trained with, at {differing}: the test "
            "split is spent on the model as it was trained; run with its parameters, or retrain"
        )
    return {**recorded, ARTIFACT: {"model_sha256": model_digest(model)}}


def configuration_identity(configuration: Mapping[str, Any]) -> str:
    """The hash of a test row's configuration without its artefact: a retrained copy of the same
    configuration is the same spend."""
    return identity_hash({key: value for key, value in configuration.items() if key != ARTIFACT})


def earlier_spends(ledger: pd.DataFrame, configuration: Mapping[str, Any]) -> pd.DataFrame:
    """Test-split rows of ``ledger``, from any source, of the same weights or the same configuration."""
    rows = ledger[ledger["split"] == SPLIT]
    artifact = configuration.get(ARTIFACT)
    identity = configuration_identity(configuration)
    same = []
    for text in rows["config"]:
        earlier = json.loads(text)
        same_weights = artifact is not None and earlier.get(ARTIFACT) == artifact
        same.append(same_weights or configuration_identity(earlier) == identity)
    return rows.loc[np.array(same, dtype=bool)]


def check_test_split(ledger: pd.DataFrame, configuration: Mapping[str, Any], allow_repeat: bool) -> dict[str, Any]:
    """The evaluation's identity (configuration, hash, repeat flag), or ``SpentTestSplitError`` when the
    ledger already holds a test-split evaluation of the same weights or configuration and
    ``allow_repeat`` is false."""
    earlier = earlier_spends(ledger, configuration)
    if not earlier.empty and not allow_repeat:
        first = earlier.iloc[0]
        raise SpentTestSplitError(
            f"the test split was already spent on this model or its configuration (agent "
            f"{configuration['agent']!r}, symbol {configuration['symbol']!r}, configuration "
            f"{configuration_identity(configuration)}): evaluation by {first['source']} recorded at "
            f"{first['timestamp']} (save version {first['save_version']}) in the trial ledger "
            f"({len(earlier)} evaluation(s)). Refusing to evaluate it again; to do so deliberately, run "
            f"with --params {PARAMS_PREFIX}.allow_repeat=true (the ledger row records repeat: true)."
        )
    return {
        "configuration": dict(configuration),
        "config_hash": identity_hash(dict(configuration)),
        "repeat": not earlier.empty,
        "allow_repeat": bool(allow_repeat),
    }


def _create_exclusive(path: Path, payload: str) -> bool:
    """Create ``path`` holding ``payload`` unless it exists. The payload is written under another
    name first and hard-linked into place (atomic, and it refuses an existing target), so a reader
    never sees a half-written marker."""
    staging = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    staging.write_text(payload)
    try:
        os.link(staging, path)
    except FileExistsError:
        return False
    finally:
        staging.unlink()
    return True


def claim_markers(identity: Mapping[str, Any]) -> list[str]:
    """The marker names of an evaluation: one for its weights, one for its configuration."""
    configuration = identity["configuration"]
    names = [f"configuration-{configuration_identity(configuration)}.json"]
    if configuration.get(ARTIFACT):
        names.insert(0, f"artifact-{configuration[ARTIFACT]['model_sha256']}.json")
    return names


def claim_test_split(folder: str | Path, identity: Mapping[str, Any]) -> dict[str, Any]:
    """Claim the test split for ``identity`` (``check_test_split``'s) by creating its markers in
    ``folder`` exclusively: of two concurrent runs only one creates them; the other is refused, or,
    with ``allow_repeat``, becomes a repeat. Returns the identity with its final ``repeat`` flag and
    the claim's file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    claimed_at = datetime.now(UTC).isoformat(timespec="microseconds")
    payload = json.dumps({"claimed_at": claimed_at, **dict(identity)}, sort_keys=True, default=str)
    created: list[Path] = []
    for name in claim_markers(identity):
        if _create_exclusive(folder / name, payload):
            created.append(folder / name)
            continue
        if identity["allow_repeat"]:
            repeat = folder / f"{Path(name).stem}.repeat-{uuid.uuid4().hex[:8]}.json"
            _create_exclusive(repeat, payload)
            return {**identity, "repeat": True, "claim": str(repeat)}
        for path in created:  # nothing of this run was evaluated: leave no claim behind
            path.unlink()
        earlier = json.loads((folder / name).read_text()).get("claimed_at")
        raise SpentTestSplitError(
            f"the test split was already claimed for this model or its configuration at {earlier} (marker "
            f"{folder / name}; a concurrent or earlier final evaluation). Refusing to evaluate it again; "
            f"to do so deliberately, run with --params {PARAMS_PREFIX}.allow_repeat=true"
        )
    return {**identity, "claim": str(created[0])}


def evaluate_on_test(
    model: Any,
    env_spec: Any,
    identity: Mapping[str, Any],
    ledger: pd.DataFrame,
    seed: int,
    run: Mapping[str, Any] | None = None,
    model_dataset: str = "sac_icm_model",
) -> tuple[dict[str, Any], pd.DataFrame]:
    """``(report, ledger rows)`` of the model (SB3 ``predict``) on ``env_spec``'s test split."""
    configuration = identity["configuration"]
    symbol = configuration["symbol"]
    check_spec_symbol(env_spec, symbol, pipeline="final_evaluation")
    check_model_fits_spec(model, env_spec, model_dataset=model_dataset, pipeline="final_evaluation")
    metadata = model_metadata(model)
    evaluation, collapse = evaluate_policy(
        configuration["agent"],
        policy_from_sb3(model, deterministic=True),
        policy_from_sb3(model, deterministic=False),
        partial(env_spec.make_env, SPLIT),
        env_spec.periods_per_year,
        seed=seed,
        thresholds=CollapseThresholds(),
    )
    trials: Trials = trials_for(ledger, symbol, Period.of(evaluation["start"], evaluation["end"]))
    row = trial_row(
        source=FINAL_LEDGER_SOURCE,
        symbol=symbol,
        split=SPLIT,
        period_start=evaluation["start"],
        period_end=evaluation["end"],
        agent=configuration["agent"],
        configuration=configuration,
        moments=evaluation["return_moments"],
        n_runs=1,
        periods_per_year=env_spec.periods_per_year,
        run=run,
        repeat=identity["repeat"],
        attribution=evaluation["metrics"],
    )
    report = {
        "agent": configuration["agent"],
        "symbol": symbol,
        "split": SPLIT,
        "config_hash": row["config_hash"],
        "configuration": configuration,
        "repeat": identity["repeat"],
        **evaluation,
        "dsr": json_ready({"dsr": deflated_sharpe(evaluation["return_moments"], trials)})["dsr"],
        "trials": {
            **trials.describe(),
            "from": "trial_ledger: every earlier test-split evaluation of the symbol on these bars, repeats included",
        },
        "collapse": collapse,
        "model_metadata": metadata,
        "run": dict(run or {}),
    }
    return report, pd.DataFrame([row])
