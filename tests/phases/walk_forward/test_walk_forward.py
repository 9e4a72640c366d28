"""Walk-forward windows, leakage guards, stitching and the honest summary."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from helpers.walk_forward_calls import feature_section, job, section

from trading_rl.algorithms.options_her.from_spec import OptionsHerParams
from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.algorithms.saved import load_agent
from trading_rl.envs import EnvConfig
from trading_rl.evaluation.ledger.ledger import Trials, trial_key
from trading_rl.evaluation.metrics.attribution import return_attribution
from trading_rl.evaluation.validation import folds as windows
from trading_rl.features import compute_features, fit_scaler, max_lookback
from trading_rl.features.indicators import GarchParams
from trading_rl.phases import walk_forward as wf
from trading_rl.phases.walk_forward import PolicyAgent, chain_histories
from trading_rl.provenance import config_hash
from trading_rl.rewards.shaped_training import RewardShaperParams
from trading_rl.runtime import SequentialExecutor

NO_GARCH = {"features": {"garch": None}, "scaler": {"method": "robust", "clip": 5.0}}


def synthetic_prices(n_bars: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0002, 0.01, n_bars)))
    open_ = np.r_[100.0, close[:-1]] * np.exp(rng.normal(0.0, 0.002, n_bars))
    high = np.maximum(open_, close) * (1.0 + rng.uniform(0.0, 0.005, n_bars))
    low = np.minimum(open_, close) * (1.0 - rng.uniform(0.0, 0.005, n_bars))
    volume = rng.uniform(1e6, 2e6, n_bars)
    index = pd.bdate_range("2010-01-04", periods=n_bars, name="timestamp")
    return pd.DataFrame({"open": open_, "high": high, "low": low, "close": close, "volume": volume}, index=index)


@pytest.mark.parametrize(
    "n_bars, train, test, step, gap, every, max_folds",
    [(1000, 300, 100, 100, 60, 1, None), (1000, 250, 120, 80, 61, 3, None), (777, 200, 50, 70, 0, 2, 4)],
)
def test_folds_never_let_test_bars_or_the_gap_into_training(n_bars, train, test, step, gap, every, max_folds):
    folds = windows.make_folds(n_bars, train, test, step, gap, every, max_folds)
    assert folds[-1].test_stop == n_bars  # anchored at the newest bar
    if max_folds is not None:
        assert len(folds) == max_folds
    for fold in folds:
        train_bars = set(range(fold.train_start, fold.train_stop))
        forbidden = set(range(fold.train_stop, fold.test_stop))  # gap (purge + embargo) and test
        assert fold.train_start >= 0 and len(train_bars) == train
        assert fold.test_stop - fold.test_start == test
        assert fold.test_start - fold.train_stop == gap
        assert not train_bars & forbidden
        assert fold.retrain == (fold.index % every == 0)
    starts = [fold.test_start for fold in folds]
    assert starts == sorted(starts) and np.all(np.diff(starts) == step)
    # A rolling window one more step back would start before bar 0 (or max_folds cut it).
    if max_folds is None:
        assert folds[0].train_start - step < 0


def test_no_fold_fits_is_an_error_that_says_what_is_needed():
    with pytest.raises(ValueError, match="train_length"):
        windows.make_folds(100, 80, 30, 10, 5)


def test_gap_smaller_than_the_feature_lookback_is_rejected_by_key():
    features = feature_section(NO_GARCH).features
    lookback = max_lookback(features)
    with pytest.raises(ValueError, match=r"walk_forward\.gap_bars"):
        section({"gap_bars": lookback - 1}).with_gap(features)
    assert section({"gap_bars": None}).with_gap(features).gap_bars == lookback
    assert section({"max_folds": "all"}).max_folds is None
    with pytest.raises(ValueError, match=r"walk_forward\.agents"):
        section({"agents": ["nope"]})
    with pytest.raises(ValueError, match=r"walk_forward\.trian_length"):
        section({"trian_length": 10})


@pytest.mark.parametrize("feature_params", [NO_GARCH, {"features": {}, "scaler": {"method": "standard"}}])
def test_fold_training_data_ignores_everything_after_the_training_window(feature_params):
    """Rewriting the gap and test bars (and beyond) must not change one number the agent trains on,
    and the scaler must be the one fitted on the training window alone."""
    prices = synthetic_prices(900, seed=1)
    params = feature_section(feature_params)
    index = windows.tradable_index(prices, params.features)
    fold = windows.make_folds(len(index), 400, 100, 100, section().with_gap(params.features).gap_bars)[0]
    config = EnvConfig(window_size=5)
    spec = windows.fold_env_spec("X", prices, fold, params, config, 252.0)

    train_end = index[fold.train_stop - 1]
    changed = prices.copy()
    future = changed.index > train_end
    changed.loc[future, ["open", "high", "low", "close"]] *= np.linspace(0.5, 2.0, future.sum())[:, None]
    changed.loc[future, "volume"] *= 3.0
    other = windows.fold_env_spec("X", changed, fold, params, config, 252.0)

    assert spec.prices["train"].index.max() == train_end
    assert spec.prices["test"].index[config.window_size - 1] == index[fold.test_start]
    pd.testing.assert_frame_equal(spec.prices["train"], other.prices["train"])
    pd.testing.assert_frame_equal(spec.features["train"], other.features["train"])

    # Independent reference: features of the training window from its own history only.
    features_config = params.features
    if features_config.garch is not None:
        features_config = dataclasses.replace(features_config, garch=GarchParams(fit_end=train_end.isoformat()))
    history = compute_features(prices.loc[:train_end], features_config)
    train_rows = history.loc[index[fold.train_start] : train_end]
    scaler = fit_scaler(train_rows, **feature_params["scaler"])
    expected = ((train_rows - pd.Series(scaler["center"])) / pd.Series(scaler["scale"])).clip(-5, 5)
    pd.testing.assert_frame_equal(
        spec.features["train"].loc[index[fold.train_start] :],
        expected[spec.features["train"].columns],
        check_freq=False,
    )


class ConstantModel:
    """Stands in for an SB3 model: always the same action; remembers how it was trained."""

    def __init__(self, action: float, history: list) -> None:
        self.action = action
        self.history = history

    def predict(self, observation, deterministic=True):
        return np.array([self.action], dtype=np.float32), None


def test_run_covers_every_fold_seed_agent_and_fine_tunes_between_retrains(monkeypatch):
    calls = []

    def trainer(spec, params, seed, timesteps, model=None, device="auto"):
        calls.append((spec.splits["train"]["end"], seed, timesteps, model is not None))
        if model is None:
            return PolicyAgent(ConstantModel(0.5 if params["tag"]["marker"] == "A" else -0.5, [timesteps]))
        model.model.history.append(timesteps)
        return model

    monkeypatch.setitem(wf.AGENT_TRAINERS, "fake", trainer)
    prices = {"X": synthetic_prices(800, seed=2), "Y": synthetic_prices(700, seed=3)}
    params = {
        "train_length": 250,
        "test_length": 80,
        "step": 80,
        "max_folds": 3,
        "retrain_frequency": 2,
        "seeds": 2,
        "agents": ["fake"],
        "timesteps": 7,
        "finetune_timesteps": 3,
        "data_end": "all",
    }
    result = wf.run_walk_forward(
        prices,
        section(params),
        job(NO_GARCH, {"window_size": 5}, {"X": 252.0, "Y": 252.0}, {"fake": {"tag": {"marker": "A"}}}, 0),
    )

    folds = result.folds
    agents = folds[folds["kind"] == "agent"]
    assert len(agents) == 2 * 3 * 2  # symbols × folds × seeds
    assert set(folds.loc[folds["kind"] == "baseline", "agent"]) == {
        "buy_and_hold",
        "cash",
        "random",
        "sma_crossover",
        "buy_and_hold_full",
    }
    # fold 0 trains from scratch, fold 1 fine-tunes it, fold 2 retrains: per chain 7, 3, 7.
    assert [c[2] for c in calls] == [7, 3, 7] * 4
    assert [c[3] for c in calls] == [False, True, False] * 4
    # Test windows of a symbol do not overlap and start after their training window plus the gap.
    for _, rows in agents.groupby(["symbol", "seed"]):
        assert (pd.to_datetime(rows["test_start"]) > pd.to_datetime(rows["train_end"])).all()
    # A constant action sits in one bucket (it still fills to keep its target): collapsed, not trading.
    assert {"fill_rate", "collapsed", "trades"} <= set(agents)
    assert agents["collapsed"].all() and not agents["trades"].any() and (agents["fill_rate"] > 0).all()
    # Baselines get the same verdict (random trades, cash does not); the market line has none.
    verdicts = folds[folds["kind"] == "baseline"].groupby("agent")["trades"].agg(lambda v: set(v.astype(str)))
    assert verdicts["random"] == {"True"} and verdicts["cash"] == {"False"} and verdicts["buy_and_hold_full"] == {"nan"}
    # Every test step is recorded and matches the table's step count.
    counts = result.returns.groupby(["symbol", "fold", "kind", "agent", "seed"]).size()
    merged = folds.set_index(["symbol", "fold", "kind", "agent", "seed"])["n_steps"]
    assert (counts.sort_index() == merged.sort_index()).all()
    # Agents and baselines are attributed against the market line of their window; each step keeps
    # its exposure and the market's return on it (1 and its own return for the market line).
    attributed = folds[folds["agent"] != "buy_and_hold_full"]
    assert attributed[["alpha_annual", "beta", "mean_exposure"]].notna().all().all()
    # held at cash's mean exposure (0), the exposure-matched passive is flat: no Sharpe
    assert attributed["exposure_matched_sharpe"].isna().to_numpy().tolist() == (attributed["agent"] == "cash").tolist()
    assert folds.loc[folds["agent"] == "buy_and_hold_full", "beta"].isna().all()
    steps = result.returns
    line = steps[steps["agent"] == "buy_and_hold_full"]
    assert (line["exposure"] == 1.0).all() and np.array_equal(line["market"], line["return"])
    cash = steps[steps["agent"] == "cash"]
    assert (cash["exposure"] == 0.0).all()
    one_window = steps[(steps["symbol"] == "X") & (steps["fold"] == 0)]
    assert (
        one_window.groupby(["agent", "seed"])["market"]
        .apply(lambda m: np.array_equal(m, line["market"].iloc[: len(m)]))
        .all()
    )
    # One record per chain (symbol × seed × retrain group): env steps trained so far after each
    # fold, joined with the fold's test metrics; a model without a saved form is not kept.
    assert [(c.symbol, c.seed, c.folds) for c in result.chains] == [
        (symbol, seed, folds) for symbol in "XY" for seed in (0, 1) for folds in ([0, 1], [2])
    ]
    assert [[p["timestep"] for p in c.training] for c in result.chains[:2]] == [[7, 10], [7]]
    assert all(c.agent is None for c in result.chains)
    histories = chain_histories(result.chains, folds)
    assert list(histories)[:2] == ["X_fake_seed0_folds0-1", "X_fake_seed0_folds2-2"]
    sharpe = agents.set_index(["symbol", "seed", "fold"])["sharpe"]
    assert histories["Y_fake_seed1_folds0-1"][1]["test/sharpe"] == sharpe[("Y", 1, 1)]


class CountingExecutor(SequentialExecutor):
    """The sequential executor, recording each ``map`` call's function and task count."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def map(self, fn, kwargs_list, on_result=None, *, others_may_compute=False):
        self.calls.append((fn.__name__, len(kwargs_list)))
        return super().map(fn, kwargs_list, on_result, others_may_compute=others_may_compute)


def test_variants_share_one_execution_and_each_equals_its_own_run(monkeypatch):
    def trainer(spec, params, seed, timesteps, model=None, device="auto"):
        return model or PolicyAgent(ConstantModel(params.sac.learning_rate * 1000.0 - 0.5, [timesteps]))

    monkeypatch.setitem(wf.AGENT_TRAINERS, "sac_icm", trainer)
    params = {
        "train_length": 250,
        "test_length": 80,
        "step": 80,
        "max_folds": 3,
        "retrain_frequency": 2,
        "seeds": 2,
        "timesteps": 7,
        "finetune_timesteps": 3,
        "data_end": "all",
    }
    variants = [section({**params, "agent_overrides": {"sac": {"learning_rate": rate}}}) for rate in (1e-4, 5e-4, 9e-4)]
    arguments = job(NO_GARCH, {"window_size": 5}, {"X": 252.0, "Y": 252.0}, {"sac_icm": {}}, 0)
    prices = {"X": synthetic_prices(800, seed=2), "Y": synthetic_prices(700, seed=3)}
    executor = CountingExecutor()
    together = wf.run_walk_forward_variants(prices, variants, arguments, executor)

    # The folds are prepared once; all 3 variants x 2 symbols x 2 seeds x 2 retrain groups in one call.
    assert executor.calls == [("prepare_fold", 6), ("run_retrain_group", 24)]
    for variant, result in zip(variants, together):
        alone = wf.run_walk_forward(prices, variant, arguments)
        pd.testing.assert_frame_equal(result.folds, alone.folds, check_exact=True)
        pd.testing.assert_frame_equal(result.returns, alone.returns, check_exact=True)
        assert [(c.symbol, c.seed, c.folds) for c in result.chains] == [
            (c.symbol, c.seed, c.folds) for c in alone.chains
        ]
    # each variant trained with its own overrides
    actions = [r.returns.loc[r.returns["kind"] == "agent", "action_raw"].round(6).unique().tolist() for r in together]
    assert actions == [[-0.4], [0.0], [0.4]]

    with pytest.raises(ValueError, match=r"variant 1 differs from variant 0 in \['walk_forward\.seeds'\]"):
        wf.run_walk_forward_variants(prices, [section(params), section({**params, "seeds": 1})], arguments)


def test_runs_of_successive_seed_indices_merge_into_the_run_of_all_seeds(monkeypatch):
    """Tuning's pruner trains a trial seed by seed: joined, the runs are the full run, row for row."""
    trained = []

    def trainer(spec, params, seed, timesteps, model=None, device="auto"):
        trained.append(seed)
        return model or PolicyAgent(ConstantModel(0.1 + (seed % 97) / 200.0, [timesteps]))

    for agent in ("sac_icm", "sac"):
        monkeypatch.setitem(wf.AGENT_TRAINERS, agent, trainer)
    params = section(
        {
            "agents": ["sac_icm", "sac"],
            "train_length": 250,
            "test_length": 80,
            "step": 80,
            "max_folds": 3,
            "retrain_frequency": 2,
            "seeds": 3,
            "timesteps": 7,
            "finetune_timesteps": 3,
            "data_end": "all",
        }
    )
    arguments = job(NO_GARCH, {"window_size": 5}, {"X": 252.0, "Y": 252.0}, {"sac_icm": {}}, 0)
    prices = {"X": synthetic_prices(800, seed=2), "Y": synthetic_prices(700, seed=3)}
    full = wf.run_walk_forward(prices, params, arguments)
    full_seeds, trained[:] = sorted(set(trained)), []
    [first] = wf.run_walk_forward_variants(prices, [params], arguments, seed_indices=[0])
    assert sorted(set(trained)) == [wf.agent_seed(0, 0)] and set(first.folds["seed"]) == {-1, 0}
    [rest] = wf.run_walk_forward_variants(prices, [params], arguments, seed_indices=range(1, 3))
    assert sorted(set(trained)) == full_seeds

    merged = wf.merge_seed_runs([first, rest])
    pd.testing.assert_frame_equal(merged.folds, full.folds, check_exact=True)
    pd.testing.assert_frame_equal(merged.returns, full.returns, check_exact=True)
    assert [(c.symbol, c.agent_name, c.seed, c.folds) for c in merged.chains] == [
        (c.symbol, c.agent_name, c.seed, c.folds) for c in full.chains
    ]
    for bad in ([], [1, 0], [3]):
        with pytest.raises(ValueError, match=r"seed_indices must be increasing indexes of 'walk_forward\.seeds' \(3\)"):
            wf.run_walk_forward_variants(prices, [params], arguments, seed_indices=bad)


def test_stitching_keeps_each_step_once_and_compounds():
    rows = []
    for fold, start in enumerate(["2020-01-01", "2020-01-03"]):  # overlapping 3-day windows
        for i, timestamp in enumerate(pd.date_range(start, periods=3)):
            rows.append(
                {
                    "symbol": "X",
                    "kind": "agent",
                    "agent": "a",
                    "seed": 0,
                    "fold": fold,
                    "timestamp": timestamp,
                    "return": 0.01 * (fold + 1) * (i + 1),
                    "action_raw": 0.0,
                }
            )
    stitched = windows.stitch_out_of_sample(pd.DataFrame(rows))
    assert list(stitched["timestamp"]) == list(pd.date_range("2020-01-01", periods=5))
    expected_returns = [0.01, 0.02, 0.02, 0.04, 0.06]  # fold 0 until fold 1 starts, then fold 1
    np.testing.assert_allclose(stitched["return"], expected_returns)
    np.testing.assert_allclose(stitched["equity"].iloc[-1], np.prod(1 + np.array(expected_returns)))


COSTS = {"periods_per_year": {"X": 252}, "cost_rate": 0.0003}


def _with_market(steps: pd.DataFrame, exposure: float = 0.5, seed: int = 99) -> pd.DataFrame:
    """Walk-forward steps with an ``exposure`` and the market line's return on each timestamp."""
    stamps = steps["timestamp"].drop_duplicates().sort_values()
    market = pd.Series(np.random.default_rng(seed).normal(0.0003, 0.01, len(stamps)), index=stamps.to_numpy())
    return steps.assign(exposure=exposure, market=market.reindex(steps["timestamp"].to_numpy()).to_numpy())


def test_summary_attributes_each_seeds_stitched_series_and_states_standard_errors():
    rng = np.random.default_rng(1)
    stamps = pd.date_range("2020-01-01", periods=600)
    market = rng.normal(0.0003, 0.01, 600)
    folds, steps = [], []
    for seed in range(3):
        for fold in range(3):
            window = slice(200 * fold, 200 * (fold + 1))
            # a quarter of the market plus a daily edge of 8 bp: beta 0.25, alpha about 20% a year
            returns = 0.25 * market[window] + 0.0008 + rng.normal(0, 0.002, 200)
            sharpe = returns.mean() / returns.std(ddof=1) * np.sqrt(252)
            alpha = (returns.mean() - 0.25 * market[window].mean()) * 252
            folds.append(
                {
                    "symbol": "X",
                    "kind": "agent",
                    "agent": "a",
                    "seed": seed,
                    "fold": fold,
                    "sharpe": sharpe,
                    "alpha_annual": alpha,
                }
            )
            steps.append(
                pd.DataFrame(
                    {
                        "symbol": "X",
                        "kind": "agent",
                        "agent": "a",
                        "seed": seed,
                        "fold": fold,
                        "timestamp": stamps[window],
                        "return": returns,
                        "action_raw": 0.0,
                        "exposure": 0.25,
                        "market": market[window],
                    }
                )
            )
    folds, steps = pd.DataFrame(folds), pd.concat(steps, ignore_index=True)
    entry = windows.summarise(folds, steps, {"X": Trials((), {})}, **COSTS)["X"]["agents"]["a"]
    stitched = entry["stitched_attribution_median"]
    assert stitched["beta"] == pytest.approx(0.25, abs=0.02)
    assert stitched["mean_exposure"] == pytest.approx(0.25)
    assert stitched["alpha_annual"] == pytest.approx(0.0008 * 252, rel=0.15)
    assert entry["skill_seed_share"] == 1.0
    errors, detectable = entry["standard_errors"], entry["min_detectable"]
    assert errors["sharpe_stitched"] == pytest.approx(stitched["sharpe_se"])
    assert errors["alpha_stitched"] == pytest.approx(stitched["alpha_se"])
    assert errors["sharpe_median_windows"] == pytest.approx(np.sqrt(np.pi / 2) * folds["sharpe"].std(ddof=1) / 3.0)
    assert detectable == {name: pytest.approx(2 * value) for name, value in errors.items()}
    # an unskilled copy of the market at the same exposure: no seed passes
    steps["return"] = 0.25 * steps["market"] + rng.normal(0, 0.002, len(steps))
    assert windows.summarise(folds, steps, {"X": Trials((), {})}, **COSTS)["X"]["agents"]["a"]["skill_seed_share"] < 1.0


def test_summary_refuses_returns_without_exposure_and_market():
    steps = _agent_steps(agents=("a",), seeds=1, folds=1).drop(columns=["market"])
    folds = pd.DataFrame([{"symbol": "X", "kind": "agent", "agent": "a", "seed": 0, "fold": 0, "sharpe": 1.0}])
    with pytest.raises(ValueError, match=r"walk_forward_returns lacks column\(s\) \['market'\]"):
        windows.summarise(folds, steps, {"X": Trials((), {})}, **COSTS)


def test_summary_reports_medians_not_the_best_seed_and_counts_every_trial():
    rng = np.random.default_rng(0)
    folds, steps = [], []
    for agent in ("a", "b"):
        for seed in range(3):
            for fold in range(4):
                returns = rng.normal(0.001 * seed, 0.01, 50)
                sharpe = returns.mean() / returns.std(ddof=1) * np.sqrt(252)
                folds.append(
                    {
                        "symbol": "X",
                        "kind": "agent",
                        "agent": agent,
                        "seed": seed,
                        "fold": fold,
                        "sharpe": sharpe,
                        "total_return": np.prod(1 + returns) - 1,
                    }
                )
                steps += [
                    {
                        "symbol": "X",
                        "kind": "agent",
                        "agent": agent,
                        "seed": seed,
                        "fold": fold,
                        "timestamp": pd.Timestamp("2020-01-01") + pd.Timedelta(days=50 * fold + i),
                        "return": r,
                        "action_raw": 0.0,
                    }
                    for i, r in enumerate(returns)
                ]
    folds, steps = pd.DataFrame(folds), _with_market(pd.DataFrame(steps))
    trials = Trials(tuple(rng.normal(0.0, 0.05, 10)), {"walk_forward": 4, "ab_sac_icm": 6})
    summary = windows.summarise(folds, steps, {"X": trials}, **COSTS)["X"]
    assert summary["n_trials"] == 10 and summary["trials_by_source"] == {"walk_forward": 4, "ab_sac_icm": 6}
    a = folds[folds["agent"] == "a"]["sharpe"]
    stats = summary["agents"]["a"]["metrics"]["sharpe"]
    assert stats["median"] == pytest.approx(np.median(a))
    assert stats["iqr"] == pytest.approx(np.quantile(a, 0.75) - np.quantile(a, 0.25))
    assert stats["median"] < a.max()
    assert summary["agents"]["a"]["positive_sharpe_share"] == pytest.approx((a > 0).mean())
    # DSR deflates: the bar is the luckiest of the 10 ledger trials, so it is below the plain PSR.
    assert summary["agents"]["a"]["dsr_median"] < summary["agents"]["a"]["psr_median"]
    # Fewer than 2 configurations tried: no DSR (the runs of one configuration are not trials).
    lone = windows.summarise(folds, steps, {"X": Trials((0.1,), {"walk_forward": 1})}, **COSTS)["X"]
    assert lone["n_trials"] == 1 and lone["agents"]["a"]["dsr_median"] is None


def test_summary_dsr_falls_with_more_spread_trials_in_the_ledger():
    rng = np.random.default_rng(4)
    steps = _with_market(
        pd.DataFrame(
            [
                {
                    "symbol": "X",
                    "kind": "agent",
                    "agent": "a",
                    "seed": 0,
                    "fold": 0,
                    "timestamp": pd.Timestamp("2020-01-01") + pd.Timedelta(days=i),
                    "return": r,
                    "action_raw": 0.0,
                }
                for i, r in enumerate(rng.normal(0.002, 0.01, 300))
            ]
        )
    )
    folds = pd.DataFrame([{"symbol": "X", "kind": "agent", "agent": "a", "seed": 0, "fold": 0, "sharpe": 1.0}])
    few = (0.05, -0.02, 0.01)
    dsr = [
        windows.summarise(folds, steps, {"X": Trials(sharpes, {})}, **COSTS)["X"]["agents"]["a"]["dsr_median"]
        for sharpes in (few, few + tuple(rng.normal(0.0, 0.08, 30)))
    ]
    assert dsr[1] < dsr[0]


def _agent_steps(agents=("a", "b"), seeds=3, folds=2, n=20, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for agent in (*agents, "cash"):
        kind = "baseline" if agent == "cash" else "agent"
        for s in range(1 if kind == "baseline" else seeds):
            for fold in range(folds):
                for i in range(n):
                    rows.append(
                        {
                            "symbol": "X",
                            "kind": kind,
                            "agent": agent,
                            "seed": s if kind == "agent" else -1,
                            "fold": fold,
                            "timestamp": pd.Timestamp("2020-01-01") + pd.Timedelta(days=n * fold + i),
                            "return": rng.normal(0.001, 0.01),
                            "action_raw": 0.0,
                        }
                    )
    return _with_market(pd.DataFrame(rows))


def test_trial_rows_pool_each_configuration_over_folds_and_seeds_and_skip_baselines():
    steps = _agent_steps()
    params = {"agents": ["sac_icm", "sac"], "seeds": 3, "train_length": 100, "test_length": 20, "step": 20}
    agent_params = {"sac_icm": {"sac": {"batch_size": 64}}}
    rows = wf.trial_rows(
        steps.replace({"a": "sac_icm", "b": "sac"}),
        section(params),
        job(NO_GARCH, {"window_size": 5}, {"X": 252.0}, agent_params, 7),
        {"save_version": "v1", "git_commit": "abc"},
    )
    assert list(rows["agent"]) == ["sac_icm", "sac"]
    assert (rows["n_runs"] == 3 * 2).all() and (rows["source"] == "walk_forward").all()
    assert (rows["split"] == "walk_forward").all() and (rows["save_version"] == "v1").all()
    pooled = steps[steps["agent"] == "a"]["return"].to_numpy()
    assert rows.iloc[0]["n_obs"] == pooled.size
    assert rows.iloc[0]["mean"] == pytest.approx(pooled.mean())
    assert rows.iloc[0]["sharpe"] == pytest.approx(pooled.mean() / pooled.std(ddof=1))
    assert rows.iloc[0]["sharpe_annualised"] == pytest.approx(rows.iloc[0]["sharpe"] * np.sqrt(252))
    assert rows["config_hash"].nunique() == 2
    # The attribution columns: the median over seeds of each stitched series' attribution.
    first = steps[steps["agent"] == "a"]
    seeds = [
        return_attribution(curve["return"], curve["exposure"], curve["market"], periods_per_year=252, cost_rate=0.0003)
        for _, curve in windows.stitch_out_of_sample(first).groupby("seed")
    ]
    assert rows.iloc[0]["alpha_annual"] == pytest.approx(np.median([item.alpha_annual for item in seeds]))
    assert rows.iloc[0]["mean_exposure"] == 0.5 and np.isfinite(rows.iloc[0]["beta"])

    # The hash is the configuration's: another agent in the list or another device leaves it alone,
    # a changed agent parameter or protocol key changes it.
    def hash_of(params=params, agent_params=agent_params):
        return wf.trial_rows(
            steps.replace({"a": "sac_icm", "b": "sac"}),
            section(params),
            job(NO_GARCH, {"window_size": 5}, {"X": 252.0}, agent_params, 7),
        ).iloc[0]["config_hash"]

    assert hash_of({**params, "agents": ["sac_icm"], "device": "cpu"}) == rows.iloc[0]["config_hash"]
    assert hash_of({**params, "vtrace": {"unroll_length": 8}}) == rows.iloc[0]["config_hash"]  # another agent's
    assert hash_of(agent_params={"sac_icm": {"sac": {"learning_rate": 1e-3}}}) != rows.iloc[0]["config_hash"]
    assert hash_of({**params, "seeds": 4}) != rows.iloc[0]["config_hash"]


def test_identity_leaves_out_run_time_keys_and_keeps_random_streams_apart():
    """Two configurations that differ only in a declared run-time key are one identity; rows that
    differ in what sets the random streams are two identities of one trial (a re-roll, pooled)."""
    steps = _agent_steps().replace({"a": "sac_icm", "b": "sac"})
    params = {"agents": ["sac_icm", "sac"], "seeds": 3, "train_length": 100, "test_length": 20, "step": 20}

    def rows(params=params, agent_params=None, seed=7):
        agent_params = agent_params or {"sac_icm": {"sac": {"batch_size": 64}, "icm": {"enabled": True}}}
        return wf.trial_rows(
            steps, section(params), job(NO_GARCH, {"window_size": 5}, {"X": 252.0}, agent_params, seed)
        )

    base = rows()
    run_time = {"training": {"log_interval": 1, "resume": "force"}, "collapse": {"check_freq": 7}}
    with_run_time = {"sac_icm": {"sac": {"batch_size": 64}, "icm": {"enabled": True}, **run_time}}
    assert list(rows(agent_params=with_run_time)["config_hash"]) == list(base["config_hash"])
    assert list(rows({**params, "device": "cpu"})["config_hash"]) == list(base["config_hash"])
    # sac trains with the ICM off: its ICM settings cannot act.
    icm = {"sac_icm": {"sac": {"batch_size": 64}, "icm": {"enabled": True, "eta": 0.5}}}
    assert rows(agent_params=icm).iloc[1]["config_hash"] == base.iloc[1]["config_hash"]
    assert rows(agent_params=icm).iloc[0]["config_hash"] != base.iloc[0]["config_hash"]
    # Another base seed or seed count: another identity (other random streams), the same trial.
    for reroll in (rows(seed=8), rows({**params, "seeds": 4})):
        assert reroll.iloc[0]["config_hash"] != base.iloc[0]["config_hash"]
        assert trial_key(reroll.iloc[0]["config"]) == trial_key(base.iloc[0]["config"])
    # Before agent streams were shared, the stream was the agent's index in walk_forward.agents: a row
    # recorded at index 1 is another identity of the same trial (benchmarks/migrate_ledger.py).
    legacy = json.loads(base.iloc[0]["config"])
    legacy["streams"]["agent_stream"] = 1
    assert config_hash(legacy) != base.iloc[0]["config_hash"]
    assert trial_key(json.dumps(legacy)) == trial_key(base.iloc[0]["config"])


def test_every_agent_trains_on_the_same_streams_whatever_the_agent_list(monkeypatch):
    """Common random numbers: ``[b]`` and ``[a, b]`` train b on the same seeds (so listing another agent
    neither re-rolls b nor hides a re-roll), and a and b share their seed per (fold, seed index)."""
    seen: dict[tuple, list[int]] = {}

    def recording(name):
        def trainer(spec, params, seed, timesteps, model=None, device="auto"):
            seen.setdefault(name, []).append(seed)
            return PolicyAgent(ConstantModel(0.5, []))

        return trainer

    monkeypatch.setitem(wf.AGENT_TRAINERS, "fake_a", recording("a"))
    monkeypatch.setitem(wf.AGENT_TRAINERS, "fake_b", recording("b"))
    params = {"train_length": 250, "test_length": 60, "step": 60, "max_folds": 2, "seeds": 2, "timesteps": 5}
    params.update(finetune_timesteps=0, data_end="all")
    prices = {"X": synthetic_prices(900, seed=4)}

    def seeds_of_b(agents):
        seen.clear()
        wf.run_walk_forward(
            prices, section({**params, "agents": agents}), job(NO_GARCH, {"window_size": 5}, {"X": 252.0}, {}, 0)
        )
        return list(seen["b"]), list(seen.get("a", []))

    alone, _ = seeds_of_b(["fake_b"])
    listed_second, a_seeds = seeds_of_b(["fake_a", "fake_b"])
    assert alone == listed_second == a_seeds and len(set(alone)) == 2


def test_default_walk_forward_never_reads_a_bar_of_the_test_split(monkeypatch):
    """``data_end: validation``: scrambling every bar after the validation split changes nothing,
    and no window (training, gap or test) reaches past the validation end."""
    monkeypatch.setitem(
        wf.AGENT_TRAINERS,
        "fake",
        lambda spec, params, seed, timesteps, model=None, device="auto": PolicyAgent(ConstantModel(0.5, [])),
    )
    feature_params = {**NO_GARCH, "splits": {"train_end": "2012-06-29", "validation_end": "2013-03-29"}}
    params = {
        "train_length": 250,
        "test_length": 60,
        "step": 60,
        "max_folds": 2,
        "seeds": 1,
        "agents": ["fake"],
        "timesteps": 5,
        "finetune_timesteps": 0,
    }
    clean = synthetic_prices(1200, seed=4)
    scrambled = clean.copy()
    after = scrambled.index > pd.Timestamp("2013-03-29")
    assert after.sum() > 100
    scrambled.loc[after, ["open", "high", "low", "close"]] *= np.random.default_rng(0).uniform(
        0.5, 2.0, (after.sum(), 1)
    )

    def run(prices):
        return wf.run_walk_forward(
            {"X": prices}, section(params), job(feature_params, {"window_size": 5}, {"X": 252.0}, {"fake": {}}, 0)
        )

    first, second = run(clean), run(scrambled)
    pd.testing.assert_frame_equal(first.folds, second.folds)
    pd.testing.assert_frame_equal(first.returns, second.returns)
    assert pd.to_datetime(first.folds["test_end"]).max() <= pd.Timestamp("2013-03-29")
    # The validation split's purge gap comes before it, so its last bar is the last one used.
    assert pd.to_datetime(first.returns["timestamp"]).max() == clean.index[~after][-1]


def test_data_end_that_is_not_a_date_is_rejected_by_key():
    with pytest.raises(ValueError, match="walk_forward.data_end"):
        windows.development_prices(synthetic_prices(300, seed=1), "yesterday-ish", feature_section(NO_GARCH))


def test_summary_trading_share_reads_verdicts_as_saved_to_csv():
    """``walk_forward_folds`` is a CSV: its ``trades`` verdicts come back as text, and "False" must
    not count as trading."""
    steps = _agent_steps(agents=("a",), seeds=2, folds=2)
    folds = pd.DataFrame(
        [
            {"symbol": "X", "kind": "agent", "agent": "a", "seed": s, "fold": f, "sharpe": 1.0, "trades": verdict}
            for (s, f), verdict in zip([(0, 0), (0, 1), (1, 0), (1, 1)], ["True", "False", "False", "False"])
        ]
    )
    summary = windows.summarise(folds, steps, {"X": Trials((0.1, 0.2), {})}, **COSTS)["X"]["agents"]["a"]
    assert summary["trading_share"] == 0.25


def test_vtrace_and_es_train_with_their_walk_forward_sections():
    config = section({"vtrace": {"unroll_length": 8}, "es": {"generations": 3}})
    agent_params = job(NO_GARCH, {}, {}, {"sac_icm": {"sac": {"batch_size": 64}}}, 0).with_walk_forward_agents(config)
    assert wf.agent_section("vtrace", agent_params, config.agent_overrides).unroll_length == 8
    assert wf.agent_section("es", agent_params, config.agent_overrides).generations == 3
    assert wf.agent_section("sac_icm", agent_params, {}).sac.batch_size == 64
    with pytest.raises(
        ValueError, match=r"'walk_forward\.vtrace\.total_timesteps' is not accepted: .*walk_forward\.timesteps"
    ):
        section({"vtrace": {"total_timesteps": 100}})


@pytest.mark.slow
def test_hierarchical_agents_train_fine_tune_and_are_scored_through_their_option_layer():
    """``options_her`` joins the walk-forward: fold 0 trains from scratch, fold 1 fine-tunes the
    same agent (controller and replay buffer carried over), and each test window is scored with the
    agent's own option layer and env settings (shorting on, no smoothing), not as a flat SB3 policy."""
    from trading_rl.algorithms.options_her.hierarchical import HierarchicalAgent

    prices = synthetic_prices(700, seed=3)
    source = {"policy": {"net_arch": [16, 16]}, "sac": {"learning_starts": 50, "batch_size": 16, "buffer_size": 3000}}
    phase = {
        "env_overrides": {"allow_short": True, "smoothing_window": 1, "episode_length": 60},
        "controller": {"hidden_dim": 16, "warmup_steps": 20, "batch_size": 8, "buffer_size": 500},
        "sac": {"learning_starts": 70, "batch_size": 16, "buffer_size": 3000},
        "training": {"log_freq": 50},
    }
    params = {
        "train_length": 250,
        "test_length": 60,
        "step": 60,
        "max_folds": 2,
        "seeds": 1,
        "retrain_frequency": 2,
        "agents": ["options_her"],
        "timesteps": 150,
        "finetune_timesteps": 80,
        "data_end": "all",
    }
    trained: list[HierarchicalAgent] = []
    original = wf.AGENT_TRAINERS["options_her"]

    def recording(*args, **kwargs):
        agent = original(*args, **kwargs)
        trained.append(agent)
        return agent

    wf.AGENT_TRAINERS["options_her"] = recording
    try:
        result = wf.run_walk_forward(
            {"X": prices},
            section(params),
            job(
                NO_GARCH,
                {},
                {"X": 252.0},
                {"options": {"source": source, "phase": OptionsHerParams.from_mapping(phase, "options_her")}},
                1,
            ),
        )
    finally:
        wf.AGENT_TRAINERS["options_her"] = original
    assert len(trained) == 2 and trained[0] is trained[1]  # fine-tuned, not rebuilt
    agent = trained[0]
    assert agent.her is not None and agent.uses_options and agent.low_level.num_timesteps == 150 + 80
    assert agent.trend_zero != 0.0  # measured from a zero return via the fold's scaler
    agents = result.folds[result.folds["kind"] == "agent"]
    assert list(agents["agent"]) == ["options_her", "options_her"]
    steps = result.returns[result.returns["agent"] == "options_her"]
    cash = result.returns[result.returns["agent"] == "cash"]
    assert steps.groupby("fold").size().equals(cash.groupby("fold").size())  # every test bar, once
    assert (steps["action_raw"].abs() <= 1).all()
    # the chain's final agent comes back as its own zip, with the steps of its whole chain
    [chain] = result.chains
    assert [point["timestep"] for point in chain.training] == [150, 230]
    kept = load_agent(chain.agent, SACWithICM)
    assert isinstance(kept, HierarchicalAgent) and kept.low_level.num_timesteps == 230


@pytest.mark.slow
def test_shaped_agent_learns_from_the_shaped_reward_at_its_own_scale_and_is_fine_tuned():
    from trading_rl.rewards.shaper import ShapedRewardWrapper

    prices = synthetic_prices(700, seed=4)
    source = {
        "policy": {"net_arch": [16, 16]},
        "reward_scale": 100.0,
        "sac": {"learning_starts": 40, "batch_size": 16, "buffer_size": 3000},
        "icm": {"enabled": True, "warmup_steps": 40, "feature_dim": 8, "hidden_dim": 16},
    }
    params = {
        "train_length": 250,
        "test_length": 60,
        "step": 60,
        "max_folds": 2,
        "seeds": 1,
        "retrain_frequency": 2,
        "agents": ["shaped"],
        "timesteps": 120,
        "finetune_timesteps": 60,
        "data_end": "all",
    }
    models = []
    original = wf.AGENT_TRAINERS["shaped"]

    def recording(*args, **kwargs):
        models.append(original(*args, **kwargs))
        return models[-1]

    wf.AGENT_TRAINERS["shaped"] = recording
    try:
        result = wf.run_walk_forward(
            {"X": prices},
            section(params),
            job(
                NO_GARCH,
                {},
                {"X": 252.0},
                {
                    "shaped": {
                        "source": source,
                        "phase": RewardShaperParams.from_mapping(
                            {"training": {"shaped_reward_scale": 1.0}}, "reward_shaper"
                        ),
                    }
                },
                2,
            ),
        )
    finally:
        wf.AGENT_TRAINERS["shaped"] = original
    model = models[0].model
    assert models[1].model is model and model.num_timesteps == 120 + 60
    assert model.reward_scale == 1.0  # shaped rewards are O(1): not the P&L reward's x100
    assert model.icm is not None and isinstance(model.get_env().envs[0].env, ShapedRewardWrapper)
    assert (result.folds["agent"] == "shaped").sum() == 2
