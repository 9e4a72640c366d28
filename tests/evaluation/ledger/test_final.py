"""The test split is spent on what is evaluated: every bypass of the audit (issue 27) is refused or
counted. A model here is a stand-in with SB3's ``policy.state_dict()`` and the metadata the sac_icm
node records; the Kedro run of the same rules is tests/pipelines/final_evaluation."""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from trading_rl.envs import EnvConstructionParams
from trading_rl.evaluation.ledger import ledger
from trading_rl.evaluation.ledger.final import (
    SpentTestSplitError,
    check_test_split,
    claim_test_split,
    evaluated_configuration,
    model_digest,
)
from trading_rl.evaluation.metrics.metrics import return_moments
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.training.identity import sac_icm_configuration
from trading_rl.training.params import AgentParams

PROJECT = Path(__file__).resolve().parents[3]
COMMITTED_LEDGER = PROJECT / "docs" / "results" / "trial_ledger"
ENV = EnvConstructionParams.from_mapping(
    {"symbol": "sp500", "env": {"window_size": 10}, "periods_per_year": 252.0}, "env_construction"
)
FEATURES = FeatureExtractionParams.from_mapping(
    {
        "symbols": [{"name": "sp500", "source": "packaged"}],
        "features": {"sma_windows": [20]},
        "scaler": {"method": "standard"},
        "splits": {"train_end": "2012-12-31", "validation_end": "2015-12-31"},
    },
    "feature_extraction",
)
SEED = 42


def _sac_icm(**agent) -> AgentParams:
    return AgentParams.from_mapping(agent, "sac_icm.agent")


def _model(configuration: dict, weights: float = 1.0) -> SimpleNamespace:
    state = {"actor.weight": torch.full((2, 2), weights), "critic.bias": torch.zeros(3)}
    return SimpleNamespace(
        policy=SimpleNamespace(state_dict=lambda: state),
        trading_rl_metadata={"configuration": copy.deepcopy(configuration), "save_version": "2026-11-26T07.30"},
    )


TRAINED = sac_icm_configuration(_sac_icm(), ENV, FEATURES, SEED)


def _spend(identity: dict) -> pd.DataFrame:
    """The ledger after ``identity``'s test-split evaluation was recorded."""
    row = ledger.trial_row(
        source="final_evaluation",
        symbol="sp500",
        split="test",
        period_start="2016-04-01",
        period_end="2018-12-31",
        agent="sac_icm",
        configuration=identity["configuration"],
        moments=return_moments(np.random.default_rng(0).normal(0.0005, 0.01, 693)),
        n_runs=1,
        periods_per_year=252.0,
        run={"save_version": "v1"},
        repeat=identity["repeat"],
    )
    return ledger.validate_rows([row])


def _evaluate(model, sac_icm=None, seed=SEED, spent=None, allow_repeat=False) -> dict:
    run = sac_icm_configuration(sac_icm or _sac_icm(), ENV, FEATURES, seed)
    configuration = evaluated_configuration(model, run, "sac_icm_model")
    return check_test_split(ledger.empty_ledger() if spent is None else spent, configuration, allow_repeat)


def test_parameters_that_disagree_with_the_model_are_refused_naming_the_keys():
    model = _model(TRAINED)
    # `--params seed=43` on the same saved model: the model was trained with seed 42.
    with pytest.raises(ValueError, match=r"disagree.*\['streams.seed'\]"):
        _evaluate(model, seed=43)
    # A report claiming learning rate 0.1 for a model trained at 3e-4 is never written.
    with pytest.raises(ValueError, match=r"'agent_params.sac.learning_rate'"):
        _evaluate(model, _sac_icm(sac={"learning_rate": 0.1}))
    # A model trained under an earlier algorithm version is evaluated as the model it is.
    older = _model({**TRAINED, "algorithm_version": 0})
    assert _evaluate(older)["configuration"]["algorithm_version"] == 0
    with pytest.raises(ValueError, match="carries no recorded training configuration"):
        _evaluate(SimpleNamespace(policy=model.policy, trading_rl_metadata={}))


@pytest.mark.parametrize(
    "agent",
    [
        {"training": {"log_interval": 99}},  # logging
        {"training": {"resume": "force", "resume_every": 7}},  # resume
        {"collapse": {"check_freq": 5}},  # check interval
        {"auxiliary": {"weights": {"next_return": 3.0}}},  # a switched-off section's contents
        {"curriculum": {"min_episodes": 9}},
        {"sac": {"learning_rate": 3e-4 + 1e-19}},  # below float precision of the weights
    ],
    ids=["log_interval", "resume", "collapse_check_freq", "auxiliary_weights_off", "curriculum_off", "lr_1e-19"],
)
def test_a_no_op_change_is_the_same_spend_and_refused(agent):
    model = _model(TRAINED)
    spent = _spend(_evaluate(model))
    with pytest.raises(SpentTestSplitError, match="already spent.*allow_repeat=true"):
        _evaluate(model, _sac_icm(**agent), spent=spent)


def test_the_same_weights_or_a_retrained_copy_are_refused_and_a_repeat_is_recorded():
    model = _model(TRAINED)
    first = _evaluate(model)
    assert first["configuration"]["artifact"] == {"model_sha256": model_digest(model)}
    spent = _spend(first)
    with pytest.raises(SpentTestSplitError):
        _evaluate(_model(TRAINED, weights=2.0), spent=spent)  # retrained, other weights, same configuration
    repeat = _evaluate(model, spent=spent, allow_repeat=True)
    assert repeat["repeat"] is True
    # Both looks are trials of the test period's DSR.
    looks = pd.concat([spent, _spend(repeat)], ignore_index=True)
    assert ledger.trials_for(looks, "sp500", ledger.Period.of("2016-04-01", "2018-12-31")).n == 2


def test_two_concurrent_runs_cannot_both_spend_it(tmp_path):
    identity = _evaluate(_model(TRAINED))
    barrier, outcomes = threading.Barrier(8), []

    def run(allow_repeat: bool) -> None:
        barrier.wait()
        try:
            outcomes.append(claim_test_split(tmp_path / "claims", {**identity, "allow_repeat": allow_repeat}))
        except SpentTestSplitError as error:
            outcomes.append(error)

    threads = [threading.Thread(target=run, args=(False,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    claims = [outcome for outcome in outcomes if isinstance(outcome, dict)]
    assert len(claims) == 1 and claims[0]["repeat"] is False and len(outcomes) == 8
    assert all("already claimed" in str(outcome) for outcome in outcomes if not isinstance(outcome, dict))
    # Allowed repeats are claimed too, each recorded as a repeat.
    again = claim_test_split(tmp_path / "claims", {**identity, "allow_repeat": True})
    assert again["repeat"] is True and Path(again["claim"]).exists()


def test_a_fresh_clone_refuses_what_the_committed_ledger_reports_as_spent(tmp_path):
    """docs/results.md §6 reports one final evaluation of sp500's sac_icm: the committed ledger holds
    it, the catalog's guard reads the committed ledger, and a clone with an empty data/ refuses it."""
    catalog = yaml.safe_load((PROJECT / "conf" / "base" / "catalog_ledger.yml").read_text())
    assert catalog["prior_trial_ledger"]["also_read"] == ["docs/results/trial_ledger"]
    from trading_rl.integration.datasets import TrialLedgerDataset

    fresh = TrialLedgerDataset(str(tmp_path / "data" / "trial_ledger"), read_only=True, also_read=[COMMITTED_LEDGER])
    committed = fresh.load()
    [reported] = committed[committed["source"] == "final_evaluation"]["config"].tolist()
    configuration = ledger.json.loads(reported)
    assert configuration["streams"] == {"seed": SEED} and configuration["symbol"] == "sp500"
    with pytest.raises(SpentTestSplitError, match="final_evaluation recorded at 2026-11-26T07:37"):
        check_test_split(committed, configuration, allow_repeat=False)
