"""A quick ``--env ci`` run after a base run leaves the base run's world as it was: its latest
versions, its trial ledger (DSR), its MLflow store and registry. The ci run writes under ``data/ci``
to its own MLflow store and ledger, records its env, and names the ``conf/local`` files it ignores."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import mlflow
import pytest
from log_gaps import log_gaps

from trading_rl.evaluation.ledger.ledger import Period, append_rows, read_ledger, trial_row, trials_for

REGISTERED = "trading_rl_sac_icm"


def snapshot(data: Path) -> dict[str, int]:
    """Every file under ``data`` except the ci root, with its size."""
    return {
        str(path.relative_to(data)): path.stat().st_size
        for path in sorted(data.rglob("*"))
        if path.is_file() and path.relative_to(data).parts[0] != "ci"
    }


BASE_PERIOD = Period.of("2005-01-03", "2012-12-31")


def base_row(sharpe_mean: float) -> dict:
    moments = {"n_obs": 100, "mean": sharpe_mean, "std": 0.01, "skew": 0.0, "kurtosis": 3.0}
    return trial_row(
        source="walk_forward",
        symbol="sp500",
        split="walk_forward",
        period_start="2005-01-03",
        period_end="2012-12-31",
        agent="sac_icm",
        configuration={"agent": "sac_icm", "lr": sharpe_mean},
        moments=moments,
        n_runs=4,
        periods_per_year=252,
        run={"save_version": "base", "config_env": "local"},
    )


# The ci walk-forward's models, ledger rows and manifest go where the env puts them whatever their
# number: one chain (sp500, one seed, its two folds) of ci's four shows it.
ONE_CHAIN = {"walk_forward": {"symbols": ["sp500"], "seeds": 1}}

# Set in the process that test_a_ci_run_after_a_base_run_leaves_its_world_untouched starts.
FRESH_PROCESS = "TRADING_RL_TEST_FRESH_PROCESS"


@pytest.mark.slow
def test_a_ci_run_after_a_base_run_leaves_its_world_untouched(tmp_path):
    """The scenario below, in a fresh Python process, as a `kedro` command runs: the base run must
    log into this project's relative ``sqlite:///mlflow.db``, and MLflow keeps the store that a
    relative URI first named for the life of a process (an earlier test's project, here)."""
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", f"{__file__}::{SCENARIO}"],
        env={**os.environ, FRESH_PROCESS: "1"},
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=540,
    )
    output = completed.stdout[-4000:] + completed.stderr[-2000:]
    assert completed.returncode == 0 and "1 passed" in completed.stdout, output


SCENARIO = "test_a_ci_run_after_a_base_run_leaves_base_versions_ledger_and_registry_untouched"


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get(FRESH_PROCESS) != "1", reason="needs a fresh process: the test above starts one")
def test_a_ci_run_after_a_base_run_leaves_base_versions_ledger_and_registry_untouched(
    project_copy, kedro_run, tmp_path, caplog
):
    project = project_copy(tmp_path / "project", ci_data_root="data/ci")
    cwd = os.getcwd()
    os.chdir(project)
    try:
        kedro_run(project, ["feature_extraction", "env_construction"], env=None)  # base + conf/local
        base_store = f"sqlite:///{project / 'mlflow.db'}"
        client = mlflow.MlflowClient(base_store, base_store)
        (base_run,) = client.search_runs([client.get_experiment_by_name("trading_rl").experiment_id])
        assert base_run.data.tags["trading_rl.env"] == "local"
        # a deployed base model and two base trials (DSR counts 2)
        client.create_registered_model(REGISTERED)
        version = client.create_model_version(REGISTERED, f"runs:/{base_run.info.run_id}/sac_icm", base_run.info.run_id)
        client.set_registered_model_alias(REGISTERED, "champion", version.version)
        append_rows(project / "data/08_reporting/trial_ledger", [base_row(0.001), base_row(0.002)])
        before = snapshot(project / "data")
        (project / "conf/local/parameters_feature_extraction.yml").write_text(
            "feature_extraction:\n  symbols:\n    - {name: GOOGL, source: file}\n"
        )

        caplog.clear()
        # Kedro's logging config, applied once by the first session, replaced the root's handlers
        # (pytest's capture handler among them).
        logging.getLogger().addHandler(caplog.handler)
        try:
            with caplog.at_level(logging.INFO):
                kedro_run(
                    project,
                    ["feature_extraction", "env_construction", "walk_forward"],
                    env="ci",
                    runtime_params=ONE_CHAIN,
                )
        finally:
            logging.getLogger().removeHandler(caplog.handler)
        # The log as its records (which handler prints them depends on the logging config in use),
        # one line each, stamped as conf/logging.yml stamps them.
        ci_log = "\n".join(
            f"{datetime.fromtimestamp(record.created):%Y-%m-%d %H:%M:%S},{int(record.msecs):03d} {record.getMessage()}"
            for record in caplog.records
        )
        ci_run = mlflow.last_active_run()
    finally:
        os.chdir(cwd)

    assert snapshot(project / "data") == before  # no new version, no ledger file, no manifest in base
    assert trials_for(read_ledger(project / "data/08_reporting/trial_ledger"), "sp500", BASE_PERIOD).n == 2
    assert len(client.search_runs([client.get_experiment_by_name("trading_rl").experiment_id])) == 1
    assert [v.version for v in client.search_model_versions(f"name='{REGISTERED}'")] == [version.version]
    assert client.get_model_version_by_alias(REGISTERED, "champion").version == version.version

    ci = project / "data/ci"
    assert list((ci / "06_models/walk_forward_models").iterdir()) and list((ci / "09_runs").rglob("*.json"))
    ci_ledger = read_ledger(ci / "08_reporting/trial_ledger")
    assert len(ci_ledger) and set(ci_ledger["config_env"]) == {"ci"}
    ci_store = f"sqlite:///{ci / 'mlflow.db'}"
    ci_client = mlflow.MlflowClient(ci_store, ci_store)
    assert ci_client.get_experiment(ci_run.info.experiment_id).name == "trading_rl_ci"
    assert ci_client.get_run(ci_run.info.run_id).data.tags["trading_rl.env"] == "ci"
    ignored = "IGNORES conf/local/parameters_feature_extraction.yml"
    assert ci_log.count(ignored) == 2  # at the start and again after the summary
    longest = log_gaps(ci_log.splitlines())[0]
    assert longest.seconds <= 60, longest  # no silent minute (benchmarks/log_gaps.py)
