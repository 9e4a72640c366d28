"""benchmarks/controls: the verdicts against the issue's bar, paired lever differences, variant parsing,
and one tiny end-to-end run (walk-forward with oracles on two synthetic markets)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from controls import market_entry, null_false_positives, parse_variant, summarise
from learning_curve import load_parameters

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _rows(arm: str, captures: dict[str, list[float]], skills: dict[str, list[bool]]) -> list[dict]:
    rows = []
    for symbol, values in captures.items():
        family = symbol.split("_")[0]
        oracle_sharpe = {"fast_0.3": 2.5, "fast_0.1": 0.8, "null_0": 0.5}[symbol]
        for seed, (capture, skill) in enumerate(zip(values, skills[symbol])):
            rows.append(
                {
                    "arm": arm,
                    "symbol": symbol,
                    "family": family,
                    "seed": seed,
                    "agent_sharpe": 1.0,
                    "agent_ir": capture * 3.0,
                    "agent_alpha_t": 2.0,
                    "agent_mean_exposure": 0.1,
                    "skill": skill,
                    "oracle_sharpe": oracle_sharpe,
                    "oracle_ir": 3.0,
                    "buy_and_hold_sharpe": 0.6,
                    "capture": capture if family != "null" else np.nan,
                    "capture_alpha": capture,
                    "buy_and_hold_capture": 0.2,
                }
            )
    return rows


def test_verdicts_follow_the_bar_on_the_strongest_market_and_the_null_false_positive_rate():
    passing = [0.6, 0.55, 0.7, 0.5, 0.3]
    rows = _rows(
        "a",
        {"fast_0.3": passing, "fast_0.1": [0.0] * 5, "null_0": [0.0] * 5},
        {"fast_0.3": [True, True, True, True, False], "fast_0.1": [False] * 5, "null_0": [True] + [False] * 4},
    )
    one_seed_low = [0.6, 0.55, 0.7, 0.5, 0.2]  # a seed below 25% of the oracle fails the bar
    rows += _rows(
        "b",
        {"fast_0.3": one_seed_low, "fast_0.1": [0.0] * 5, "null_0": [0.0] * 5},
        {"fast_0.3": [True] * 5, "fast_0.1": [False] * 5, "null_0": [False] * 5},
    )
    summary = summarise(pd.DataFrame(rows), ["a", "b"])
    assert summary["verdicts"]["a"] == {"strongest": {"fast_0.3": True}, "null_false_positive_rate": 0.2}
    assert summary["verdicts"]["b"]["strongest"] == {"fast_0.3": False}
    [paired] = [row for row in summary["paired_capture_differences"] if row["symbol"] == "fast_0.3"]
    assert paired["pairs"] == 5 and paired["capture_difference_median"] == 0.0
    market = next(row for row in summary["markets"] if row["arm"] == "a" and row["symbol"] == "fast_0.3")
    assert market["capture_median"] == 0.55 and market["capture_min"] == 0.3 and market["skill_passes"] == 4
    low, high = market["capture_ci90"]
    assert low <= 0.55 <= high


def test_variants_and_markets_parse_into_their_sections():
    name, overrides = parse_variant("lever env.smoothing_window=1 agent.sac.gamma=0.5 wf.timesteps=100")
    assert name == "lever"
    assert overrides == {"env": {"smoothing_window": 1}, "agent": {"sac": {"gamma": 0.5}}, "wf": {"timesteps": 100}}
    with pytest.raises(SystemExit, match="expected env.KEY=V"):
        parse_variant("bad gamma=0.5")
    entry = market_entry("vol:0.15", 900, 3, {"vol": 0.25})
    assert entry == {
        "name": "vol_0.15",
        "source": "synthetic",
        "market": {"family": "vol", "strength": 0.15, "n_bars": 900, "seed": 3, "drift": 0.25},
    }


@pytest.mark.slow
def test_tiny_end_to_end_run_reports_capture_against_the_oracle(tmp_path):
    """The script's whole path on ci parameters; 60 steps (10 updates past ci's learning_starts) per
    agent: capture is checked for being reported, not for what the agent learned."""
    out = tmp_path / "controls.json"
    command = [
        sys.executable,
        str(BENCHMARKS / "controls.py"),
        "--env", "ci",
        "--markets", "fast:0.3", "null:0",
        "--n-bars", "700",
        "--seeds", "1",
        "--max-folds", "1",
        "--timesteps", "60",
        "--engine", "sequential",
        "--no-ledger",
        "--variant", "target env.action_mode=target env.smoothing_window=1",
        "--out", str(out),
    ]  # fmt: skip
    subprocess.run(command, check=True, cwd=BENCHMARKS.parent, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    markets = {(row["arm"], row["symbol"]): row for row in result["summary"]["markets"]}
    assert set(markets) == {(arm, symbol) for arm in ("default", "target") for symbol in ("fast_0.3", "null_0")}
    fast = markets[("target", "fast_0.3")]
    assert fast["oracle_sharpe"] > fast["buy_and_hold_sharpe"] + 1.0  # the oracle trades the planted edge
    assert fast["capture_median"] is not None
    assert markets[("target", "null_0")]["capture_median"] is None  # nothing to capture on null
    assert out.with_suffix(".png").exists() and out.with_suffix(".returns.parquet").exists()


def test_null_false_positives_score_the_untrained_policies_on_every_null_market():
    params = load_parameters("ci")
    rates = null_false_positives(2, 700, params["walk_forward"], params["feature_extraction"], {"window_size": 5})
    assert set(rates) == {"random", "sma_crossover", "buy_and_hold", "oracle"}
    for entry in rates.values():
        assert entry["markets"] == 2 and 0 <= entry["passes"] <= 2 and entry["rate"] == entry["passes"] / 2


def test_population_engine_runs_a_population_per_ray_worker_with_jobs(ray_session):
    """``--engine population --jobs N``: the walk-forward's population executor with N Ray workers
    (runtime.population.workers), the env's Ray settings kept; one in-process population for N = 1."""
    from controls import make_executor

    from trading_rl.phases.walk_forward.population import PopulationExecutor
    from trading_rl.runtime.engine import RayExecutor, SequentialExecutor

    split = make_executor("population", 2, {"engine": "ray", "ray": {"num_gpus_per_task": 0.0}})
    assert isinstance(split, PopulationExecutor) and split.workers == 2 and isinstance(split.base, RayExecutor)
    alone = make_executor("population", 1, {})
    assert isinstance(alone, PopulationExecutor) and alone.workers == 1 and isinstance(alone.base, SequentialExecutor)
    assert isinstance(make_executor("sequential", 2, {}), SequentialExecutor)
    with pytest.raises(ValueError, match="runtime"):
        make_executor("population", 0, {})
