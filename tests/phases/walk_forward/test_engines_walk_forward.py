"""Walk-forward on Ray gives exactly the sequential numbers: the validation pipeline's node with the
ci parameters and real data, and a run with several retrain groups per chain; populations split over
Ray workers give exactly the one population's numbers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import torch
from helpers.synthetic_prices import random_walk_prices
from helpers.walk_forward_calls import job, section
from helpers.wired import wired_functions
from kedro.config import OmegaConfigLoader

from trading_rl.data import load_prices
from trading_rl.evaluation.validation import folds as windows
from trading_rl.phases import walk_forward as wf
from trading_rl.phases.walk_forward.population import PopulationExecutor, make_executor
from trading_rl.pipelines.walk_forward.pipeline import create_pipeline
from trading_rl.runtime import (
    PopulationParams,
    RayExecutor,
    RuntimeParams,
    SequentialExecutor,
    make_runtime_executor,
)

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def ci_parameters() -> dict:
    loader = OmegaConfigLoader(
        str(PROJECT_ROOT / "conf"), base_env="base", default_run_env="ci", merge_strategy={"parameters": "soft"}
    )
    return loader["parameters"]


# ci's walk-forward budgets cut to 60 steps from scratch (10 updates past learning_starts, the ICM on
# from step 50) and a 20-step fine-tune: a Ray worker that drifts from the kedro process by a bit
# (another thread count, another seed) shows in the first update's weights, and ci's 150 + 50 steps
# added nothing but training time.
TEST_BUDGETS = {"timesteps": 60, "finetune_timesteps": 20}


@pytest.mark.slow
def test_validation_node_with_ci_parameters_gives_the_same_tables_on_ray(ray_session):
    """The first ci symbol only: its 2 seeds are 2 chains, enough for both Ray workers (the other
    symbol runs the same code and doubled the test's time)."""
    params = ci_parameters()
    first = params["feature_extraction"]["symbols"][0]
    symbols = [first["name"]]
    prices = load_prices(first["name"]).assign(symbol=first["name"])
    arguments = (
        prices,
        {**params["walk_forward"], **TEST_BUDGETS},
        {**params["feature_extraction"], "symbols": [first]},
        params["env_construction"],
        params["sac_icm"],
        params["seed"],
    )
    walk_forward = wired_functions(create_pipeline())["walk_forward"]
    sequential = walk_forward(*arguments, {"engine": "sequential"})
    on_ray = walk_forward(*arguments, {**params["runtime"], "engine": "ray"})
    for expected, actual in zip(sequential[:2], on_ray[:2]):
        pd.testing.assert_frame_equal(actual, expected, check_exact=True)
    # each chain's final agent came back from its Ray worker with the sequential run's weights
    chains = len(symbols) * params["walk_forward"]["seeds"]
    assert len(sequential[2]) == chains and sorted(on_ray[2]) == sorted(sequential[2])
    for name, model in sequential[2].items():
        for key, value in model.policy.state_dict().items():
            assert torch.equal(on_ray[2][name].policy.state_dict()[key], value), (name, key)
    agents = sequential[0][sequential[0]["kind"] == "agent"]
    assert len(agents) == len(symbols) * params["walk_forward"]["seeds"] * params["walk_forward"]["max_folds"]
    assert agents["action_entropy"].notna().all()


# Three folds retraining every second fold: groups [0, 1] and [2] per agent × seed.
RETRAIN_FEATURES = {"features": {"garch": None}, "scaler": {"method": "robust", "clip": 5.0}}
RETRAIN_PARAMS = {
    "train_length": 200,
    "test_length": 40,
    "step": 40,
    "max_folds": 3,
    "retrain_frequency": 2,
    "data_end": "all",
    "seeds": 2,
    "agents": ["sac_icm", "vtrace", "es"],
    "timesteps": 60,
    "finetune_timesteps": 20,
    "device": "cpu",
}
RETRAIN_AGENT = {
    "sac_icm": {
        "sac": {"learning_starts": 20, "batch_size": 16, "buffer_size": 500},
        "policy": {"net_arch": [16]},
        "icm": {"warmup_steps": 20, "feature_dim": 8, "hidden_dim": 8},
    },
    "vtrace": {"unroll_length": 10, "net_arch": [8]},
    "es": {"generations": 2, "population_size": 4, "hidden_sizes": [4]},
}


def retrain_arguments() -> tuple:
    return (
        {"X": random_walk_prices(520, 4)},
        section(RETRAIN_PARAMS),
        job(RETRAIN_FEATURES, {"window_size": 5}, {"X": 252.0}, RETRAIN_AGENT, 3),
    )


@pytest.mark.slow
def test_retrain_groups_run_as_separate_tasks_with_identical_results(ray_session):
    """Three folds retraining every second fold: groups [0, 1] and [2] per agent × seed, for SAC+ICM,
    the V-trace actor-learner and the evolution strategy, so the Ray tasks interleave in any order."""
    arguments = retrain_arguments()
    assert [
        [fold.index for fold in group]
        for group in windows.retrain_groups(windows.make_folds(500, 200, 40, 40, 20, 2, 3))
    ] == [[0, 1], [2]]
    sequential = wf.run_walk_forward(*arguments, SequentialExecutor())
    on_ray = wf.run_walk_forward(
        *arguments, make_runtime_executor(RuntimeParams.from_mapping({"engine": "ray"}, "runtime"))
    )
    pd.testing.assert_frame_equal(on_ray.folds, sequential.folds, check_exact=True)
    pd.testing.assert_frame_equal(on_ray.returns, sequential.returns, check_exact=True)
    agents = sequential.folds[sequential.folds["kind"] == "agent"]
    assert len(agents) == 3 * 2 * 3  # agents × seeds × folds
    # Seeds differ, so the identity above is not two copies of one constant policy.
    actions = sequential.returns[sequential.returns["kind"] == "agent"].groupby(["agent", "seed"])["action_raw"].sum()
    assert actions.nunique() == len(actions)


@pytest.mark.slow
def test_population_workers_on_ray_give_the_one_process_populations_tables(ray_session):
    """The 4 SAC+ICM chains as 2 Ray tasks of 2-member populations (V-trace and ES as Ray tasks of
    their own): every number of the one population in this process."""
    runtime = RuntimeParams.from_mapping({"engine": "population", "population": {"workers": 2}}, "runtime")
    executor = make_executor(runtime)
    assert isinstance(executor, PopulationExecutor) and isinstance(executor.base, RayExecutor)
    one_process = wf.run_walk_forward(
        *retrain_arguments(), make_executor(dataclasses.replace(runtime, population=PopulationParams()))
    )
    on_ray = wf.run_walk_forward(*retrain_arguments(), executor)
    pd.testing.assert_frame_equal(on_ray.folds, one_process.folds, check_exact=True)
    pd.testing.assert_frame_equal(on_ray.returns, one_process.returns, check_exact=True)
