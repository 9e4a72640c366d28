"""Deployment by registry alias: ``promotion`` refuses what must not be deployed, and ``kedro run
--pipelines promote`` moves the alias and records who, when and in which run."""

from __future__ import annotations

import json
import os

import mlflow
import pytest

from trading_rl.integration.model_registry import PromotionError, deployment_of, promotion


def _version(number: int, aliases=(), **gates: str) -> dict:
    tags = {"save_version": f"v{number}", **{f"gate.{name}": why for name, why in gates.items()}}
    return {"version": number, "run_id": f"run{number}", "tags": tags, "aliases": list(aliases), "created": number}


def test_the_newest_version_whose_gates_passed_is_promoted_and_the_previous_one_named():
    versions = [_version(1, ["champion"], validation_report="passed"), _version(2, validation_report="passed")]
    decision = promotion("m", versions, None, "champion", by="me", at="now")
    assert (decision["version"], decision["previous_version"], decision["save_version"]) == (2, 1, "v2")
    assert decision["gates"] == {"validation_report": "passed"}


@pytest.mark.parametrize(
    ("versions", "version", "message"),
    [
        ([], None, "'m' has no version: a model is registered only when its run's gates passed"),
        ([_version(1, validation_report="passed")], 3, r"'m' has no version 3 \(registered: \[1\]\)"),
        ([_version(1, sac_icm_collapse_report="collapsed")], 1, "version 1 cannot be promoted: sac_icm_collapse"),
        ([_version(1)], 1, "version 1 cannot be promoted: it carries no gate verdict"),
    ],
)
def test_what_must_not_be_deployed_is_refused_with_the_reason(versions, version, message):
    with pytest.raises(PromotionError, match=message):
        promotion("m", versions, version, "champion", by="me", at="now")


def test_promoting_a_version_that_is_not_a_served_model_is_warned(caplog):
    """A version registered before the served model existed serves observation tensors, not bars."""
    import logging

    from trading_rl.integration.model_registry import PromoteParams
    from trading_rl.pipelines.promote.nodes import promote_model

    served = _version(2, validation_report="passed")
    served["tags"]["serving"] = "bars and portfolio in, signal out (docs/serve.md)"
    registry = {"registered_model": "m", "versions": [_version(1, validation_report="passed"), served]}
    for number, warned in ((1, True), (2, False)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="trading_rl.pipelines.promote.nodes"):
            decision, _ = promote_model(registry, PromoteParams(version=number), {"save_version": "now"})
        assert bool(decision["serving"]) is not warned
        assert any("is not a served model" in r.getMessage() for r in caplog.records) is warned


@pytest.mark.slow
def test_the_promote_pipeline_moves_the_alias_and_records_who_when_and_which_run(project_copy, kedro_run, tmp_path):
    project = project_copy(tmp_path / "project")
    store = f"sqlite:///{project / 'data/ci/mlflow.db'}"
    client = mlflow.MlflowClient(store, store)
    client.create_registered_model("trading_rl_sac_icm")
    for gates in ({"gate.validation_report": "passed"}, {"gate.validation_report": "failed: sharpe"}):
        client.create_model_version("trading_rl_sac_icm", "runs:/r/sac_icm", tags={"save_version": "v", **gates})
    cwd = os.getcwd()
    os.chdir(project)
    try:
        assert deployment_of(client, "trading_rl_sac_icm", "champion")["status"] == "none promoted"
        with pytest.raises(PromotionError, match="version 2 cannot be promoted: validation_report failed: sharpe"):
            kedro_run(project, ["promote"], runtime_params={"promote": {"version": 2}})
        kedro_run(project, ["promote"], runtime_params={"promote": {"version": 1}})
        run = mlflow.last_active_run()
    finally:
        os.chdir(cwd)
    deployed = deployment_of(client, "trading_rl_sac_icm", "champion")
    assert (deployed["status"], deployed["version"], deployed["promoted_in_run"]) == ("deployed", 1, run.info.run_id)
    assert deployed["promoted_by"] and deployed["promoted_at"] and deployed["gates"] == {"validation_report": "passed"}
    (report,) = (project / "data/08_reporting/promotion_report.json").rglob("*.json")
    assert json.loads(report.read_text())["version"] == 1
