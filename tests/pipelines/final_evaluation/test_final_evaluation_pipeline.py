"""final_evaluation in Kedro sessions (ci budgets): the test split is spent once per trained model and
configuration, and only with parameters that describe the model."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers.mlflow_store import copy_without_runs

from trading_rl.evaluation.ledger.final import SpentTestSplitError

LEDGER = "data/08_reporting/trial_ledger"
REPORT = "data/08_reporting/final_evaluation/final_evaluation_report.json"
TEARSHEET = "data/08_reporting/final_evaluation/final_evaluation_tearsheet.html"
ROLLOUT = "data/08_reporting/final_evaluation/final_evaluation_rollout.parquet"


def _snapshot(project: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(project)): path.read_bytes()
        for folder in (LEDGER, REPORT, TEARSHEET, ROLLOUT)
        if (project / folder).exists()
        for path in sorted((project / folder).rglob("*"))
        if path.is_file()
    }


def _reports(project: Path) -> list[dict]:
    return [
        json.loads((version / "final_evaluation_report.json").read_text())
        for version in sorted((project / REPORT).iterdir())
    ]


@pytest.mark.slow
def test_the_test_split_is_spent_once_per_model(sac_icm_project, kedro_run, tmp_path):
    """On a copy of ``sac_icm_project``: the model its ci sac_icm session trained, no trial yet."""
    from trading_rl.evaluation.ledger.ledger import read_ledger

    project = tmp_path / "project"
    copy_without_runs(sac_icm_project, project)
    cwd = os.getcwd()
    os.chdir(project)
    try:
        # first run: evaluates on the test split, writes the report and one ledger row
        kedro_run(project, ["final_evaluation"])
        ledger = read_ledger(project / LEDGER)
        assert list(ledger["source"]) == ["final_evaluation"] and list(ledger["split"]) == ["test"]
        assert list(ledger["repeat"]) == [False]
        [report] = _reports(project)
        assert report["split"] == "test" and report["config_hash"] == ledger.iloc[0]["config_hash"]
        assert report["start"] > "2016-01-01" and report["n_steps"] > 500
        assert set(report["baselines"]) == {"buy_and_hold", "cash", "random", "sma_crossover", "buy_and_hold_full"}
        assert "psr" in report["baselines"]["buy_and_hold"]
        assert report["trials"]["n_trials"] == 0 and report["dsr"] is None  # nothing tried on sp500 yet
        assert ledger.iloc[0]["save_version"] == report["run"]["save_version"]
        # its tearsheet: the same test-split run (same env and seed) as the report
        import pandas as pd

        version = report["run"]["save_version"]
        rollout = pd.read_parquet(project / ROLLOUT / version / Path(ROLLOUT).name)
        agent = rollout[rollout["agent"] == "sac_icm"]
        assert len(agent) == report["n_steps"]
        assert agent["equity_index"].iloc[-1] - 1.0 == pytest.approx(report["metrics"]["total_return"])
        page = (project / TEARSHEET / version / Path(TEARSHEET).name).read_text()
        assert "final_evaluation: sp500, test split" in page
        # its banner: collapse and skill on the test split
        assert 'class="banner"' in page and "<b>final_evaluation_report</b>" in page and "skill: alpha" in page

        # second run, same configuration: refused before anything is written
        before = _snapshot(project)
        earlier = re.escape(ledger.iloc[0]["timestamp"])
        with pytest.raises(
            SpentTestSplitError, match=f"recorded at {earlier}.*--params final_evaluation.allow_repeat=true"
        ):
            kedro_run(project, ["final_evaluation"])
        assert _snapshot(project) == before

        # the override evaluates again and records the repeat
        kedro_run(project, ["final_evaluation"], runtime_params={"final_evaluation": {"allow_repeat": True}})
        ledger = read_ledger(project / LEDGER)
        assert list(ledger["repeat"]) == [False, True] and ledger["config_hash"].nunique() == 1
        assert _reports(project)[-1]["repeat"] is True

        # parameters that disagree with the saved model are refused, naming the keys, before anything
        # is written: the report could otherwise claim a configuration the model was not trained with
        before = _snapshot(project)
        for override, key in (
            ({"sac_icm": {"agent": {"sac": {"learning_rate": 1.0e-3}}}}, "agent_params.sac.learning_rate"),
            ({"seed": 43}, "streams.seed"),
        ):
            with pytest.raises(ValueError, match=re.escape(key)):
                kedro_run(project, ["final_evaluation"], runtime_params=override)
        # a key that cannot change the model (logging) is the same spend: refused
        with pytest.raises(SpentTestSplitError, match="already spent"):
            kedro_run(
                project,
                ["final_evaluation"],
                runtime_params={"sac_icm": {"agent": {"training": {"log_interval": 3}}}},
            )
        assert _snapshot(project) == before
        claims = sorted(path.name for path in (project / "data/08_reporting/test_split_claims").iterdir())
        assert [name.split("-")[0] for name in claims if ".repeat-" not in name] == ["artifact", "configuration"]
        config = json.loads(read_ledger(project / LEDGER).iloc[0]["config"])
        assert config["artifact"]["model_sha256"] in claims[0] and config["streams"] == {"seed": report["run"]["seed"]}
    finally:
        os.chdir(cwd)
