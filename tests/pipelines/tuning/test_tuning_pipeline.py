"""`kedro run --pipelines tuning --env ci`: every trial lands on the ledger, the report's DSR states
the trial count, and the chosen parameters are accepted by a run (``--params`` or a config env)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers.kedro_project import bootstrap
from helpers.mlflow_store import copy_without_runs

LEDGER = "data/08_reporting/trial_ledger"
REPORT = "data/08_reporting/tuning/tuning_report.json"
TUNED = "data/06_models/tuned_parameters.yml"
TRIALS = "data/07_model_output/tuning_trials.csv"


def test_tuning_is_registered_but_not_in_the_default_run():
    from trading_rl.pipeline_registry import register_pipelines

    bootstrap()
    pipelines = register_pipelines()
    assert {node.name for node in pipelines["tuning"].nodes} == {"tuning.tune", "tuning.report_tuning"}
    assert not [node.name for node in pipelines["__default__"].nodes if node.namespace == "tuning"]


def _versions(project: Path, path: str) -> list[Path]:
    return [version / Path(path).name for version in sorted((project / path).iterdir())]


@pytest.mark.slow
def test_tuning_records_every_trial_and_its_parameters_apply(foundation_project, kedro_run, tmp_path):
    from kedro.framework.cli.utils import _split_params
    from kedro.framework.session import KedroSession

    from trading_rl.evaluation.ledger.ledger import read_ledger
    from trading_rl.integration.parameter_sections import resolve_parameters

    project = tmp_path / "project"
    copy_without_runs(foundation_project, project)
    cwd = os.getcwd()
    os.chdir(project)
    try:
        kedro_run(project, ["tuning"])
        ledger = read_ledger(project / LEDGER)
        # ci: 3 trials on sp500, one row each, all on windows that end by the training split's end
        assert list(ledger["source"]) == ["tuning"] * 3 and set(ledger["symbol"]) == {"sp500"}
        assert set(ledger["split"]) == {"walk_forward"} and ledger["config_hash"].nunique() == 3
        assert pd.to_datetime(ledger["period_end"]).max() <= pd.Timestamp("2012-12-31")
        [report_path] = _versions(project, REPORT)
        report = json.loads(report_path.read_text())
        assert report["n_study_trials"] == 3 and report["data_end"] == "train"
        assert report["selection"]["sp500"]["n_trials"] == 3
        assert report["selection"]["sp500"]["trials_by_source"] == {"tuning": 3}
        assert "dsr" in report["selection"]["sp500"] and len(report["trials"]) == 3
        trials = pd.read_csv(_versions(project, TRIALS)[0])
        assert trials["chosen"].sum() == 1 and trials.loc[trials["chosen"], "trial"].item() == report["chosen"]["trial"]
        # ci asks 2 trials at a time: a batch of 2, then the last one
        assert list(trials["population"]) == [0, 0, 1] and list(trials["population_size"]) == [2, 2, 1]

        # The chosen parameters: the --params string is what Kedro's CLI parses into the file's mapping,
        tuned = yaml.safe_load(_versions(project, TUNED)[0].read_text())
        assert tuned == report["chosen"]["parameters"]
        assert _split_params(None, None, report["chosen"]["params_argument"]) == tuned
        learning_rate = tuned["sac_icm"]["agent"]["sac"]["learning_rate"]
        # ... a run given it validates and trains with it (walk-forward overrides included), ...
        with KedroSession.create(project_path=project, env="ci", runtime_params=tuned) as session:
            params = session.load_context().params
        resolve_parameters(params)
        assert params["walk_forward"]["agent_overrides"]["sac"]["learning_rate"] == learning_rate
        assert params["walk_forward"]["agent_overrides"]["sac"]["buffer_size"] == 2000  # ci's, kept
        # ... and so does a config env holding it as a parameters file.
        (project / "conf/tuned").mkdir()
        shutil.copy(_versions(project, TUNED)[0], project / "conf/tuned/parameters_tuned.yml")
        with KedroSession.create(project_path=project, env="tuned") as session:
            params = session.load_context().params
        resolve_parameters(params)
        assert params["sac_icm"]["agent"]["sac"]["learning_rate"] == learning_rate

        # Another study (another sampler seed): its trials add to the count the new DSR uses.
        kedro_run(project, ["tuning"], runtime_params={"tuning": {"sampler_seed": 1}})
        ledger = read_ledger(project / LEDGER)
        report = json.loads(_versions(project, REPORT)[-1].read_text())
        assert len(ledger) == 6 and report["selection"]["sp500"]["n_trials"] == ledger["config_hash"].nunique() == 6
    finally:
        os.chdir(cwd)
