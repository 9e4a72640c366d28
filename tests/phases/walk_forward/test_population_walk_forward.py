"""``runtime.engine: population``: walk-forward's SAC chains train stage by stage as populations of
the very agents ``train_sac`` builds, the other agents and the baselines exactly as on the sequential
engine, and the tables keep their rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.synthetic_prices import ohlcv_frame, random_walk_prices
from helpers.walk_forward_calls import job, section
from scipy import stats

from trading_rl.algorithms.population import membership, population_sac
from trading_rl.phases import walk_forward as wf
from trading_rl.phases.walk_forward.chains import RetrainTask
from trading_rl.phases.walk_forward.population import PopulationExecutor, make_executor, split_chains
from trading_rl.runtime import RuntimeParams, SequentialExecutor

FEATURES = {"features": {"garch": None}, "scaler": {"method": "robust", "clip": 5.0}}
# Three folds retraining every second one: chains [0, 1] and [2] per agent x seed.
PARAMS = {
    "train_length": 200,
    "test_length": 40,
    "step": 40,
    "max_folds": 3,
    "retrain_frequency": 2,
    "data_end": "all",
    "seeds": 2,
    "agents": ["sac_icm", "sac", "es"],
    "timesteps": 60,
    "finetune_timesteps": 20,
    "device": "cpu",
}
POPULATION = RuntimeParams.from_mapping({"engine": "population"}, "runtime")
AGENT = {
    "sac_icm": {
        "sac": {"learning_starts": 20, "batch_size": 16, "buffer_size": 500},
        "policy": {"net_arch": [16]},
        "icm": {"warmup_steps": 20, "feature_dim": 8, "hidden_dim": 8},
    },
    "es": {"generations": 2, "population_size": 4, "hidden_sizes": [4]},
}


@pytest.mark.slow
def test_population_engine_trains_sac_chains_stage_by_stage_and_keeps_every_row(monkeypatch):
    learned = []
    original_learn = population_sac.PopulationSAC.learn

    def recording_learn(self, total_timesteps, reset_num_timesteps=True, log_interval=4):
        learned.append(
            (
                len(self.members),
                total_timesteps,
                reset_num_timesteps,
                sorted(member.icm is not None for member in self.members),
            )
        )
        result = original_learn(self, total_timesteps, reset_num_timesteps, log_interval)
        assert {member.num_timesteps for member in self.members} == {60 if reset_num_timesteps else 80}
        return result

    monkeypatch.setattr(population_sac.PopulationSAC, "learn", recording_learn)
    arguments = (
        {"X": random_walk_prices(520, 4)},
        section(PARAMS),
        job(FEATURES, {"window_size": 5}, {"X": 252.0}, AGENT, 3),
    )
    executor = make_executor(POPULATION)
    assert isinstance(executor, PopulationExecutor)
    population = wf.run_walk_forward(*arguments, executor)
    sequential = wf.run_walk_forward(*arguments, SequentialExecutor())

    # 2 agents x 2 seeds x 2 chains from scratch (half with their ICM), then the 4 two-fold chains'
    # fine-tunes, continuing their step count.
    assert learned == [(8, 60, True, [False] * 4 + [True] * 4), (4, 20, False, [False] * 2 + [True] * 2)]
    keys = ["symbol", "fold", "kind", "agent", "seed"]
    pd.testing.assert_frame_equal(population.folds[keys], sequential.folds[keys])
    exact = population.folds["agent"].isin(["es"]) | (population.folds["kind"] == "baseline")
    pd.testing.assert_frame_equal(population.folds[exact], sequential.folds[exact], check_exact=True)
    sac = population.folds[~exact]
    assert len(sac) == 2 * 2 * 3 and sac["action_entropy"].notna().all()
    # Members are distinct agents (seeds differ), not copies of one policy. (sac and sac_icm share
    # their random streams, common random numbers; at this budget the ICM has not yet acted.)
    agent_steps = population.returns[population.returns["agent"].isin(["sac", "sac_icm"])]
    actions = agent_steps.groupby(["agent", "seed"])["action_raw"].sum()
    assert (actions.groupby(level="agent").nunique() == 2).all()


def _retrain_task(retrains: list[bool], timesteps: int = 100, finetune_timesteps: int = 10) -> RetrainTask:
    return RetrainTask("sac", None, [None] * len(retrains), retrains, None, 0, timesteps, finetune_timesteps, "cpu")


def test_split_chains_gives_runs_of_consecutive_chains_with_equal_env_steps():
    equal = [_retrain_task([True, False, False]) for _ in range(10)]
    assert split_chains(equal, 2) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert split_chains(equal, 3) == [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]]
    # 120 steps each, then two one-fold chains of 100: the last group takes both short chains and a long one
    uneven = [_retrain_task([True, False, False])] * 4 + [_retrain_task([True])] * 2
    assert split_chains(uneven, 2) == [[0, 1, 2], [3, 4, 5]]
    assert split_chains(equal[:2], 4) == [[0], [1]], "no empty group"
    assert split_chains([], 2) == []


@pytest.mark.slow
def test_population_workers_give_the_one_process_populations_tables(monkeypatch):
    """Chains split over 3 workers (here in this process, one group after another; Ray:
    test_engines_walk_forward) train in smaller populations with every number of the one population."""
    sizes = []
    original_init = population_sac.PopulationSAC.__init__

    def recording_init(self, members, *args, **kwargs):
        sizes.append(len(members))
        original_init(self, members, *args, **kwargs)

    arguments = (
        {"X": random_walk_prices(520, 4)},
        section(PARAMS),
        job(FEATURES, {"window_size": 5}, {"X": 252.0}, AGENT, 3),
    )
    one = wf.run_walk_forward(*arguments, make_executor(POPULATION))
    monkeypatch.setattr(population_sac.PopulationSAC, "__init__", recording_init)
    split = wf.run_walk_forward(*arguments, PopulationExecutor(SequentialExecutor(), workers=3))
    # 8 sac / sac_icm chains of 80 and 60 steps in turn, in groups of 3, 2 and 3 (220, 140 and 200
    # steps): each group's agents from scratch, then its fine-tunes (the 80-step chains)
    assert sizes == [3, 2, 2, 1, 3, 1]
    pd.testing.assert_frame_equal(split.folds, one.folds, check_exact=True)
    pd.testing.assert_frame_equal(split.returns, one.returns, check_exact=True)


def test_variants_join_one_population_where_they_can_and_split_by_batch_size(monkeypatch):
    populations = []
    original_init = population_sac.PopulationSAC.__init__

    def recording_init(self, members, *args, **kwargs):
        populations.append(sorted((member.batch_size, member.learning_rate) for member in members))
        original_init(self, members, *args, **kwargs)

    monkeypatch.setattr(population_sac.PopulationSAC, "__init__", recording_init)
    params = {**PARAMS, "agents": ["sac"], "max_folds": 1, "seeds": 1, "timesteps": 30}
    variants = [
        section({**params, "agent_overrides": {"sac": {"batch_size": batch_size, "learning_rate": rate}}})
        for batch_size, rate in ((16, 1e-3), (32, 1e-3), (16, 3e-4))
    ]
    results = wf.run_walk_forward_variants(
        {"X": random_walk_prices(400, 4)},
        variants,
        job(FEATURES, {"window_size": 5}, {"X": 252.0}, AGENT, 3),
        make_executor(POPULATION),
    )
    # One batched step takes one batch size: the two batch-16 variants train together, batch 32 alone.
    assert populations == [[(16, 3e-4), (16, 1e-3)], [(32, 1e-3)]]
    for result in results:
        agent_rows = result.folds[result.folds["kind"] == "agent"]
        assert list(agent_rows["agent"]) == ["sac"] and agent_rows["n_steps"].item() == 39  # the 40-bar test window


def test_population_engine_refuses_auxiliary_heads_by_parameter():
    arguments = (
        {"X": random_walk_prices(520, 4)},
        section({**PARAMS, "agents": ["sac"], "max_folds": 1, "seeds": 1}),
        job(
            FEATURES,
            {"window_size": 5},
            {"X": 252.0},
            {"sac_icm": {**AGENT["sac_icm"], "auxiliary": {"enabled": True}}},
            3,
        ),
    )
    with pytest.raises(membership.PopulationError, match="auxiliary.enabled"):
        wf.run_walk_forward(*arguments, make_executor(POPULATION))


# The same-distribution A/B at a size that fits the suite (benchmarks/population_walk_forward_ab.py
# runs it at the walk-forward's budget): 6 seeds x 2 folds retrained from scratch = 12 independent
# SAC+ICM agents per engine on a market with a strong drift; target-exposure actions with a narrow
# hold band, so that every agent trades and its metrics spread. 200 steps (150 updates) at a learning
# rate of 3e-3, ten times SB3's: every trained agent then holds its position more often than an
# untrained one over 120-bar test windows, so a population that does not train is told apart (at
# 3e-4, 60-bar windows and 400 updates, the suite's earlier size, only just: smallest p 3e-4).
AB_PARAMS = {
    "train_length": 300,
    "test_length": 120,
    "step": 120,
    "max_folds": 2,
    "retrain_frequency": 1,
    "data_end": "all",
    "seeds": 6,
    "agents": ["sac_icm"],
    "timesteps": 200,
    "device": "cpu",
}
AB_ENV = {"window_size": 5, "action_mode": "target", "hold_threshold": 0.05}
AB_AGENT = {
    "sac_icm": {
        "sac": {"learning_starts": 50, "batch_size": 32, "buffer_size": 1000, "learning_rate": 3e-3},
        "policy": {"net_arch": [32]},
        "icm": {"warmup_steps": 50, "feature_dim": 8, "hidden_dim": 16},
    }
}
AB_METRICS = ("sharpe", "total_return", "hold_share", "action_entropy", "fill_rate")
AB_BAR = 0.001


def _agent_rows(arguments, executor) -> pd.DataFrame:
    folds = wf.run_walk_forward(*arguments, executor).folds
    return folds[folds["kind"] == "agent"]


def _p_values(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Per metric, the KS and Mann-Whitney p of ``a``'s agents against ``b``'s (a window without
    trades, Sharpe NaN, counts as the flat line's 0)."""
    p_values = {}
    for metric in AB_METRICS:
        x, y = (np.nan_to_num(table[metric].to_numpy(dtype=float)) for table in (a, b))
        p_values[metric] = (stats.ks_2samp(x, y).pvalue, stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)
    return p_values


@pytest.mark.slow
def test_population_engine_learns_the_sequential_engines_distribution(monkeypatch):
    """Per metric of the per-fold agent rows, neither a Kolmogorov-Smirnov nor a Mann-Whitney test
    tells the population's agents from the sequential engine's, and each engine's agents are distinct
    draws, not one policy repeated. The bar, p >= 0.001 for each of the 10 tests, keeps a false alarm
    rare on another CPU (other float rounding, another draw): here the smallest p is 0.05, and over
    base seeds 6-8 0.21-0.54. The same population with its ``train`` switched off fails the bar (hold
    share and fill rate: KS p 2e-5 at base seeds 5-8), which the test checks too."""
    rng = np.random.default_rng(11)
    prices = ohlcv_frame(100.0 * np.exp(np.cumsum(rng.normal(0.002, 0.01, 700))))
    arguments = ({"X": prices}, section(AB_PARAMS), job(FEATURES, AB_ENV, {"X": 252.0}, AB_AGENT, 5))
    tables = {
        "sequential": _agent_rows(arguments, SequentialExecutor()),
        "population": _agent_rows(arguments, make_executor(POPULATION)),
    }
    for name, table in tables.items():
        assert len(table) == 12
        assert table["total_return"].nunique() == 12, f"{name}: every agent its own policy"
    for metric, (ks, mwu) in _p_values(tables["sequential"], tables["population"]).items():
        medians = [tables[name][metric].median() for name in tables]
        assert min(ks, mwu) >= AB_BAR, f"{metric}: KS p {ks:.3f}, Mann-Whitney p {mwu:.3f} (medians {medians})"

    monkeypatch.setattr(population_sac.PopulationSAC, "train", lambda self, gradient_steps, batch_size: None)
    untrained = _p_values(tables["sequential"], _agent_rows(arguments, make_executor(POPULATION)))
    assert min(min(pair) for pair in untrained.values()) < AB_BAR, (
        f"the bar cannot tell an untrained population: {untrained}"
    )
