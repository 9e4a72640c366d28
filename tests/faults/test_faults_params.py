"""Fault suite, bad parameters (issue 18 item 4): every section refuses unknown keys at every level and
out-of-range values, naming the full dotted key, before anything is written."""

from __future__ import annotations

import copy
import hashlib
import os
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from trading_rl.config import ConfigError
from trading_rl.data import load_prices
from trading_rl.integration.parameter_sections import resolve_parameters

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def ci_parameters(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """conf/base + conf/ci, with ``overrides`` merged as Kedro merges ``--params`` (runtime params)."""
    from kedro.config import OmegaConfigLoader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # omegaconf's resolver deprecation notice
        loader = OmegaConfigLoader(
            str(PROJECT_ROOT / "conf"),
            base_env="base",
            default_run_env="ci",
            merge_strategy={"parameters": "soft"},
            runtime_params=overrides or {},
        )
        return loader["parameters"]


def with_value(parameters: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(parameters)
    *path, last = dotted.split(".")
    node = changed
    for key in path:
        node = node.setdefault(key, {})
    node[last] = value
    return changed


CI = ci_parameters()

# (dotted key, value, what the message must also say). Unknown keys at each level of each section,
# renamed and refused keys, then types and ranges.
CASES = [
    ("sac_icm.agnt", {}, "unknown parameter"),
    ("sac_icm.agent.sac.learning_rat", 1e-3, "did you mean 'sac_icm.agent.sac.learning_rate'"),
    ("sac_icm.agent.icm.etaa", 0.1, "did you mean 'sac_icm.agent.icm.eta'"),
    ("feature_extraction.min_row", 5, "did you mean 'feature_extraction.min_rows'"),
    ("feature_extraction.splits.train_ends", "2012-12-31", "did you mean 'feature_extraction.splits.train_end'"),
    ("feature_extraction.features.macd.slowe", 30, "did you mean 'feature_extraction.features.macd.slow'"),
    ("feature_extraction.scaler.methd", "robust", "did you mean 'feature_extraction.scaler.method'"),
    ("env_construction.symbl", "sp500", "did you mean 'env_construction.symbol'"),
    ("env_construction.env.windw_size", 5, "did you mean 'env_construction.env.window_size'"),
    ("options_her.controler", {}, "did you mean 'options_her.controller'"),
    ("options_her.her.goal_hi", 0.1, "did you mean 'options_her.her.goal_high'"),
    ("options_her.options.scalp.profit_targt", 0.1, "did you mean 'options_her.options.scalp.profit_target'"),
    ("options_her.sac.gama", 0.9, "did you mean 'options_her.sac.gamma'"),
    ("reward_shaper.objectives.risk.var_limt", 0.1, "did you mean 'reward_shaper.objectives.risk.var_limit'"),
    ("reward_shaper.weight_network.epoch", 3, "did you mean 'reward_shaper.weight_network.epochs'"),
    ("checkpoint_migration.migration.sac.learning_rat", 1e-3, "did you mean"),
    ("checkpoint_migration.discrete_baseline.ppo.n_step", 64, "did you mean"),
    ("export.parity.tolerence", 1e-5, "did you mean 'export.parity.tolerance'"),
    ("walk_forward.seed", 3, "did you mean 'walk_forward.seeds'"),
    ("walk_forward.vtrace.unroll", 8, "did you mean 'walk_forward.vtrace.unroll_length'"),
    ("walk_forward.es.sigmaa", 0.1, "did you mean 'walk_forward.es.sigma'"),
    ("walk_forward.vtrace.total_timesteps", 100, "walk_forward.timesteps"),
    ("regime_validation.regimes.trend_windw", 20, "did you mean 'regime_validation.regimes.trend_window'"),
    ("regime_validation.split", "test", "reserved for the final_evaluation pipeline"),
    ("validation.gates.sharpe.treshold", 0.5, "did you mean 'validation.gates.sharpe.threshold'"),
    ("validation.comparison.tolerence", 0.1, "did you mean 'validation.comparison.tolerance'"),
    ("validation.fail_on_gate_failure", True, "was renamed to 'validation.fail_on_gate'"),
    ("final_evaluation.allow_repeats", True, "did you mean 'final_evaluation.allow_repeat'"),
    ("multi_symbol.shared_encoder.lr", 1e-3, "was renamed to 'multi_symbol.shared_encoder.learning_rate'"),
    ("runtime.ray.num_cpu", 2, "did you mean 'runtime.ray.num_cpus'"),
    ("sac_icm.agent.sac.gamma", 2.0, "must be in (0, 1]"),
    ("sac_icm.agent.sac.gamma", 0.0, "must be in (0, 1]"),
    ("sac_icm.agent.sac.tau", 0, "must be in (0, 1]"),
    ("sac_icm.agent.sac.batch_size", 0, "must be in [1, inf)"),
    ("sac_icm.agent.sac.batch_size", 6000, "must be <= 'sac_icm.agent.sac.buffer_size' (5000)"),
    ("sac_icm.agent.sac.learning_rate", -1e-3, "must be in (0, inf)"),
    ("sac_icm.agent.sac.ent_coef", "autox", "'auto', 'auto_<positive number>' or a positive number"),
    ("sac_icm.agent.sac.ent_coef", "auto_-0.1", "'auto', 'auto_<positive number>' or a positive number"),
    ("sac_icm.agent.sac.ent_coef", 0.0, "'auto', 'auto_<positive number>' or a positive number"),
    ("sac_icm.agent.sac.buffer_size", "1e5", "must be an integer"),
    ("sac_icm.agent.training.total_timesteps", 0, "must be in [1, inf)"),
    # Checked when the section is parsed, not at the first evaluation (it named 'sac_icm.training.best_metric').
    ("sac_icm.agent.training.best_metric", "sharp", "must be one of ['total_return'"),
    ("walk_forward.agent_overrides.training.best_metric", "sharp", "must be one of"),
    ("walk_forward.data_end", "validaton", "'train', 'validation', 'all' or a date"),
    ("sac_icm.agent.reward_scale", 0.0, "must be in (0, inf)"),
    ("sac_icm.agent.policy.activation", "swish", "must be one of"),
    ("sac_icm.evaluation_split", "valid", "must be one of"),
    ("options_her.sac.tau", 1.5, "must be in (0, 1]"),
    ("options_her.controller.lr", -1.0, "must be in [0, inf)"),
    ("options_her.options.scalp.min_duration", 50, "must be <= max_steps (15) <= hard_timeout (30)"),
    ("walk_forward.timesteps", 0, "must be in [1, inf)"),
    ("walk_forward.agents", ["sac_icm", "ppo"], "distinct agents among"),
    ("walk_forward.vtrace.gamma", 1.5, "must be in (0, 1]"),
    ("walk_forward.es.population_size", 7, "even integer"),
    ("walk_forward.agent_overrides.sac.batch_size", 0, "must be in [1, inf)"),
    ("walk_forward.gap_bars", 3, "smaller than the longest feature look-back"),
    ("env_construction.env.hold_threshold", 1.5, "must be in [0, 1)"),
    ("env_construction.symbol", "AAPL", "not among feature_extraction.symbols"),
    ("feature_extraction.symbols", "sp500:ftp", "must be one of ['packaged', 'file', 'synthetic']"),
    ("feature_extraction.scaler.clip", -1.0, "must be in (0, inf)"),
    ("runtime.engine", "spark", "must be one of ['sequential', 'ray', 'population']"),
    ("export.parity.max_real", 5000, "must be <= 'export.parity.n_observations'"),
    ("reward_shaper.training.n_envs", 0, "must be in [1, inf)"),
    ("checkpoint_migration.fine_tune.total_timesteps", -1, "must be in [0, inf)"),
]


@pytest.mark.parametrize(("key", "value", "says"), CASES, ids=[f"{key}={value!r}" for key, value, _ in CASES])
def test_bad_parameter_is_refused_naming_its_dotted_key(key, value, says):
    with pytest.raises(ConfigError) as error:
        resolve_parameters(with_value(CI, key, value))
    message = str(error.value)
    named = "feature_extraction.symbols[0].source" if key == "feature_extraction.symbols" else key
    assert f"'{named}'" in message and says in message, message


@pytest.mark.parametrize("value", ["auto", "auto_0.1", 0.05])
def test_accepted_entropy_coefficients(value):
    resolve_parameters(with_value(CI, "sac_icm.agent.sac.ent_coef", value))


def _write_csv(path: Path) -> None:
    frame = load_prices("nasdaq").iloc[-300:].rename(columns=str.title)
    frame.to_csv(path, index_label="Date")


def test_a_user_symbol_is_chosen_from_the_command_line(tmp_path):
    """``--params "feature_extraction.symbols=MYSYM:file sp500,env_construction.symbol=MYSYM"``: no
    comma inside the value, so Kedro's splitting at commas leaves it whole."""
    from kedro.framework.cli.utils import _split_params

    from trading_rl.integration.datasets import RawPriceFilesDataset
    from trading_rl.phases.feature_extraction import load_and_validate_prices

    runtime = _split_params(None, None, "feature_extraction.symbols=MYSYM:file sp500,env_construction.symbol=MYSYM")
    sections = resolve_parameters(ci_parameters(runtime))
    _write_csv(tmp_path / "MYSYM.csv")
    prices = load_and_validate_prices(RawPriceFilesDataset(str(tmp_path)).load(), sections["feature_extraction"])
    assert list(prices["symbol"].unique()) == ["MYSYM", "sp500"]


def _snapshot(data: Path) -> dict[str, str]:
    """Every file under ``data`` with its digest, except ci's own MLflow store (``ci/mlflow.db``, an
    empty one in a project copy), which a refused run may open."""
    return {
        str(path.relative_to(data)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(data.rglob("*"))
        if path.is_file() and path.relative_to(data).as_posix() != "ci/mlflow.db"
    }


@pytest.mark.slow
def test_a_kedro_run_with_a_bad_parameter_fails_before_writing(tmp_path, project_copy, kedro_run):
    """``kedro run --env ci --pipelines feature_extraction --params feature_extraction.min_row=5``."""
    project = project_copy(tmp_path / "project")
    _write_csv(project / "data/01_raw/prices/MYSYM.csv")
    before = _snapshot(project / "data")
    cwd = os.getcwd()
    os.chdir(project)
    try:
        with pytest.raises(
            ConfigError, match=r"'feature_extraction\.min_row' \(did you mean 'feature_extraction\.min_rows'\?\)"
        ):
            kedro_run(project, ["feature_extraction"], runtime_params={"feature_extraction": {"min_row": 5}})
    finally:
        os.chdir(cwd)
    assert _snapshot(project / "data") == before  # nothing under data/ changes
    assert pd.read_csv(project / "data/01_raw/prices/MYSYM.csv").shape[0] == 300
    # Refused before kedro-mlflow's hook: no tracking run was opened (none left RUNNING).
    database = project / "data/ci/mlflow.db"
    assert not database.exists() or sqlite3.connect(database).execute("select count(*) from runs").fetchone() == (0,)
