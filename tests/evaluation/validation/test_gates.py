"""Gate report (value, threshold, pass/fail) and the comparison with the previous validation run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.gates import gate_sections

from trading_rl.evaluation.reporting.comparison import compare_reports
from trading_rl.evaluation.validation.gates import (
    GateFailure,
    ValidationParams,
    es_vs_sac_gate,
    evaluate_gates,
    gate_values,
    option_statistics,
    raise_on_failure,
    skill_values,
    validation_report,
)
from trading_rl.monitoring.actions import ACTION_BUCKETS

GATES = {
    "positive_sharpe_windows": {"metric": "positive_sharpe_window_share", "comparison": ">=", "threshold": 0.7},
    "profitable_regimes": {"metric": "profitable_regimes", "comparison": ">=", "threshold": 3},
    "max_drawdown": {"metric": "max_drawdown_median", "comparison": "<", "threshold": 0.15},
    "action_dominance": {"metric": "max_action_share_median", "comparison": "<=", "threshold": 0.6},
    "option_usage": {"metric": "option_min_usage", "comparison": ">=", "threshold": 0.1, "optional": True},
}


def fold_table(sharpes, drawdowns, dominant_share=0.4, n_trades=None) -> pd.DataFrame:
    rest = (1.0 - dominant_share) / (len(ACTION_BUCKETS) - 1)
    n_trades = [10] * len(sharpes) if n_trades is None else n_trades
    rows = []
    for i, (sharpe, drawdown, trades) in enumerate(zip(sharpes, drawdowns, n_trades)):
        row = {
            "symbol": "X",
            "kind": "agent",
            "agent": "sac_icm",
            "seed": i % 3,
            "fold": i // 3,
            "sharpe": sharpe,
            "max_drawdown": -drawdown,
            "win_rate": 0.5 if trades else np.nan,
            "action_entropy": 1.0,
            "n_trades": trades,
            "n_steps": 100,
        }
        row.update({f"action_share_{b}": (dominant_share if b == "hold" else rest) for b in ACTION_BUCKETS})
        rows.append(row)
    rows.append({**rows[0], "kind": "baseline", "agent": "buy_and_hold", "sharpe": 9.0})  # must not count
    return pd.DataFrame(rows)


def regime_table(returns: dict[str, float], n_trades: int = 5) -> pd.DataFrame:
    rows = [
        {
            "symbol": "X",
            "model": "sac_icm",
            "seed": 0,
            "regime": r,
            "total_return": v,
            "sharpe": 1.0,
            "n_trades": n_trades,
        }
        for r, v in returns.items()
    ]
    rows.append(
        {
            "symbol": "X",
            "model": "sac_icm",
            "seed": 0,
            "regime": "all",
            "total_return": 0.5,
            "sharpe": 1.0,
            "n_trades": n_trades,
        }
    )
    rows.append(
        {
            "symbol": "X",
            "model": "cash",
            "seed": -1,
            "regime": "bull",
            "total_return": 0.0,
            "sharpe": None,
            "n_trades": 0,
        }
    )
    return pd.DataFrame(rows)


GOOD_REGIMES = {"bull": 0.1, "bear": 0.02, "sideways": 0.01, "high_volatility": -0.05}


def test_values_pool_the_primary_agents_windows_only():
    folds = fold_table([1.0, 0.5, -0.2, 0.3, np.nan, 2.0], [0.05, 0.1, 0.2, 0.08, 0.01, 0.12])
    values = gate_values(folds, regime_table(GOOD_REGIMES), "sac_icm")
    assert values["positive_sharpe_window_share"] == pytest.approx(4 / 6)  # undefined Sharpe is not positive
    # One Sharpe convention: the window without a defined Sharpe counts as 0, it is not dropped.
    assert values["sharpe_median"] == pytest.approx(np.median([1.0, 0.5, -0.2, 0.3, 0.0, 2.0]))
    assert values["max_drawdown_median"] == pytest.approx(np.median([0.05, 0.1, 0.2, 0.08, 0.01, 0.12]))
    assert values["profitable_regimes"] == 3
    assert values["max_action_share_median"] == pytest.approx(0.4)
    assert values["trade_rate_median"] == pytest.approx(0.1)
    assert "option_min_usage" not in values
    with pytest.raises(ValueError, match="primary_agent"):
        gate_values(folds, regime_table(GOOD_REGIMES), "nobody")


def test_report_passes_when_every_gate_passes_and_skips_optional_gates_without_a_metric():
    values = gate_values(fold_table([1.0] * 6, [0.05] * 6), regime_table(GOOD_REGIMES), "sac_icm")
    report = evaluate_gates(values, gate_sections(GATES))
    assert report["passed"] and report["failed"] == []
    assert report["gates"]["option_usage"]["status"] == "skipped"
    entry = report["gates"]["max_drawdown"]
    assert entry == {
        "metric": "max_drawdown_median",
        "value": pytest.approx(0.05),
        "comparison": "<",
        "threshold": 0.15,
        "passed": True,
        "status": "pass",
        "blocking": True,
    }


WIN_RATE = {"win_rate": {"metric": "win_rate_median", "comparison": ">", "threshold": 0.45}}
ZERO_BAR = {"profitable_regimes": {**GATES["profitable_regimes"], "threshold": 0}}


@pytest.mark.parametrize("n_idle", [9, 5])
def test_an_agent_that_rarely_or_never_trades_fails_the_activity_gates_with_the_reason(n_idle):
    # Idle windows: flat equity, drawdown 0 — which would pass "< 0.15" vacuously.
    folds = fold_table([np.nan] * n_idle + [1.0] * (9 - n_idle), [0.0] * 9, n_trades=[0] * n_idle + [10] * (9 - n_idle))
    values = gate_values(folds, regime_table(GOOD_REGIMES, n_trades=0), "sac_icm")
    assert values["idle_windows"] == n_idle and values["windows"] == 9
    report = evaluate_gates(values, gate_sections({**GATES, **WIN_RATE, **ZERO_BAR}))
    for name in ("max_drawdown", "win_rate", "profitable_regimes"):
        gate = report["gates"][name]
        assert gate["status"] == "fail" and gate["passed"] is False and gate["value"] is None, name
        assert gate["reason"].startswith(f"agent never traded in {n_idle} of 9 windows"), gate
    with pytest.raises(GateFailure, match=f"max_drawdown \\(agent never traded in {n_idle} of 9 windows"):
        raise_on_failure(report)


def test_activity_gates_are_taken_over_the_windows_with_trades_only():
    folds = fold_table([1.0] * 6, [0.0, 0.0, 0.1, 0.12, 0.2, 0.3], n_trades=[0, 0, 3, 4, 5, 6])
    values = gate_values(folds, regime_table(GOOD_REGIMES), "sac_icm")
    assert values["idle_windows"] == 2
    assert values["max_drawdown_median"] == pytest.approx(np.median([0.1, 0.12, 0.2, 0.3]))  # not the idle 0s
    assert values["win_rate_median"] == pytest.approx(0.5)


def test_a_regime_counts_as_profitable_only_where_the_agent_traded():
    regimes = pd.concat([regime_table(GOOD_REGIMES), regime_table(GOOD_REGIMES).assign(seed=1)])
    values = gate_values(fold_table([1.0] * 6, [0.05] * 6), regimes, "sac_icm")
    assert values["profitable_regimes"] == 3
    # Positive return in bull, but the median seed made no trade there: not profitable.
    sat_out = regimes.assign(n_trades=np.where(regimes["regime"] == "bull", 0, 5))
    assert gate_values(fold_table([1.0] * 6, [0.05] * 6), sat_out, "sac_icm")["profitable_regimes"] == 2
    # Medians over seeds, never the best one: "bear" stays profitable with one losing seed of three,
    # and stops being profitable with two losing seeds of four.
    losing = regime_table({**GOOD_REGIMES, "bear": -0.1}).assign(seed=2)
    assert (
        gate_values(fold_table([1.0] * 6, [0.05] * 6), pd.concat([regimes, losing]), "sac_icm")["profitable_regimes"]
        == 3
    )
    two_losing = pd.concat([regimes, losing, losing.assign(seed=3)])
    assert gate_values(fold_table([1.0] * 6, [0.05] * 6), two_losing, "sac_icm")["profitable_regimes"] == 2


@pytest.mark.parametrize(
    "sharpes, drawdowns, regimes, dominant, failing",
    [
        ([1.0, 1.0, 1.0, -1.0, -1.0, 1.0], [0.05] * 6, GOOD_REGIMES, 0.4, "positive_sharpe_windows"),  # 4/6 < 0.7
        ([1.0] * 6, [0.2] * 6, GOOD_REGIMES, 0.4, "max_drawdown"),
        ([1.0] * 6, [0.05] * 6, {**GOOD_REGIMES, "sideways": -0.01}, 0.4, "profitable_regimes"),
        ([1.0] * 6, [0.05] * 6, GOOD_REGIMES, 0.61, "action_dominance"),
    ],
)
def test_report_fails_when_one_gate_fails(sharpes, drawdowns, regimes, dominant, failing):
    values = gate_values(fold_table(sharpes, drawdowns, dominant), regime_table(regimes), "sac_icm")
    report = evaluate_gates(values, gate_sections(GATES))
    assert not report["passed"]
    assert report["failed"] == [failing]
    assert report["gates"][failing]["passed"] is False
    with pytest.raises(GateFailure, match=failing):
        raise_on_failure(report)


def test_an_undefined_value_fails_rather_than_passes():
    report = evaluate_gates({"max_drawdown_median": None}, gate_sections({"max_drawdown": GATES["max_drawdown"]}))
    assert not report["passed"] and report["gates"]["max_drawdown"]["status"] == "fail"
    report = evaluate_gates({}, gate_sections({"max_drawdown": GATES["max_drawdown"]}))  # missing, not optional
    assert not report["passed"]


def test_bad_gate_config_is_named():
    """A gate's bad comparison is refused when the ``validation`` section is parsed, naming its key."""
    section = {
        "primary_agent": "sac_icm",
        "gates": {"g": {"metric": "m", "comparison": "=>", "threshold": 1}},
        "fail_on_gate": False,
        "comparison": {"tolerance": 0.05},
    }
    with pytest.raises(ValueError, match=r"'validation\.gates\.g\.comparison' must be one of"):
        ValidationParams.from_mapping(section, "validation")


def test_option_statistics_by_hand():
    stats = option_statistics(np.array([0, 0, 0, 1, 1, 0, 2, 2, 2, 2]))
    assert stats["option_min_usage"] == pytest.approx(0.2)  # option 1: 2 of 10 steps
    assert stats["option_mean_duration"] == pytest.approx(10 / 4)  # runs 3, 2, 1, 4


def _report(sharpes, drawdowns, regimes=GOOD_REGIMES):
    folds = fold_table(sharpes, drawdowns)
    values = gate_values(folds, regime_table(regimes), "sac_icm")
    summary = {"X": {"n_trials": 6, "agents": {}}}
    return validation_report(values, gate_sections(GATES), summary, regime_table(regimes), {"save_version": "v"})


def test_comparison_detects_a_flipped_gate_and_moved_metrics():
    before = _report([1.0] * 6, [0.05] * 6)
    after = _report([1.0] * 6, [0.2] * 6)
    comparison = compare_reports(after, before, tolerance=0.05)
    assert comparison["has_previous"] and comparison["passed_before"] and not comparison["passed_now"]
    assert [flip["gate"] for flip in comparison["gates_flipped"]] == ["max_drawdown"]
    assert comparison["gates_flipped"][0]["before"] == "pass" and comparison["gates_flipped"][0]["now"] == "fail"
    moved = {entry["metric"]: entry for entry in comparison["metrics_moved"]}
    assert set(moved) == {"gate/max_drawdown_median"}
    assert moved["gate/max_drawdown_median"]["change"] == pytest.approx(0.15)


def test_comparison_respects_tolerances_and_handles_the_first_run():
    before = _report([1.0] * 6, [0.05] * 6)
    after = _report([1.0] * 6, [0.09] * 6)
    assert compare_reports(after, before, tolerance=0.05)["metrics_moved"] == []
    tight = compare_reports(after, before, tolerance=0.05, tolerances={"gate/max_drawdown_median": 0.01})
    assert [entry["metric"] for entry in tight["metrics_moved"]] == ["gate/max_drawdown_median"]
    assert compare_reports(before, before)["gates_flipped"] == []
    first = compare_reports(after, None)
    assert first["has_previous"] is False and first["gates_flipped"] == [] and first["metrics_moved"] == []


def test_es_within_80_percent_of_sac_gate_uses_median_walk_forward_sharpe():
    folds = fold_table([1.0, 1.0, 1.0], [0.05] * 3)
    es_rows = folds[folds["kind"] == "agent"].assign(agent="es", sharpe=[0.7, 0.85, 0.9])
    values = gate_values(pd.concat([folds, es_rows]), regime_table(GOOD_REGIMES), "sac_icm")
    assert values["es_vs_sac_margin"] == pytest.approx(0.85 - 0.8)  # ES median 0.85 vs 80% of SAC's 1.0
    gate = {"es_vs_sac": {"metric": "es_vs_sac_margin", "comparison": ">=", "threshold": 0.0, "optional": True}}
    assert evaluate_gates(values, gate_sections(gate))["passed"]
    weak = pd.concat([folds, es_rows.assign(sharpe=[0.1, 0.2, 0.3])])
    assert not evaluate_gates(gate_values(weak, regime_table(GOOD_REGIMES), "sac_icm"), gate_sections(gate))["passed"]
    assert "es_vs_sac_margin" not in gate_values(folds, regime_table(GOOD_REGIMES), "sac_icm")


@pytest.mark.parametrize(
    "verdicts, expected", [([True, True, False], 2 / 3), ([False] * 3, 0.0), (["True", "False"], 0.5)]
)
def test_trading_agents_gate_is_the_share_of_windows_whose_agent_trades(verdicts, expected):
    folds = fold_table([1.0] * len(verdicts), [0.05] * len(verdicts))
    folds["trades"] = verdicts + [np.nan]  # the baseline row carries no verdict
    value = gate_values(folds, regime_table(GOOD_REGIMES), "sac_icm")["trading_window_share"]
    assert value == pytest.approx(expected)
    gate = {"trading_agents": {"metric": "trading_window_share", "comparison": ">=", "threshold": 0.666}}
    assert evaluate_gates({"trading_window_share": value}, gate_sections(gate))["passed"] == (expected >= 0.666)


@pytest.mark.parametrize(
    "es_value, sac_value, passed",
    [
        (0.85, 1.0, True),
        (0.8, 1.0, True),
        (0.75, 1.0, False),
        (-1.1, -1.0, True),
        (-1.3, -1.0, False),
        (None, 1.0, False),
    ],
)
def test_es_vs_sac_gate(es_value, sac_value, passed):
    gate = es_vs_sac_gate({"sharpe": es_value}, {"sharpe": sac_value})
    assert gate["passed"] is passed
    assert gate["threshold"] == pytest.approx(0.8 if sac_value > 0 else -1.2)
    by_return = es_vs_sac_gate({"total_return": 0.05}, {"total_return": 0.1}, ratio=0.5, metric="total_return")
    assert by_return["passed"] and by_return["threshold"] == pytest.approx(0.05)


SKILL = {"skill": {"metric": "alpha_ci90_low_median", "comparison": ">", "threshold": 0.0, "blocking": False}}


def _summary_with_alpha_lows(lows_by_symbol: dict[str, float], shares: dict[str, float]) -> dict:
    return {
        symbol: {
            "agents": {
                "sac_icm": {"stitched_attribution_median": {"alpha_ci90_low": low}, "skill_seed_share": shares[symbol]},
                "cash": {"stitched_attribution_median": {"alpha_ci90_low": 5.0}, "skill_seed_share": 1.0},
            }
        }
        for symbol, low in lows_by_symbol.items()
    }


def test_skill_gate_reads_the_stitched_attribution_and_does_not_block_by_default():
    values = skill_values(
        _summary_with_alpha_lows({"X": -0.02, "Y": -0.01, "Z": 0.03}, {"X": 0, "Y": 0.5, "Z": 1}), "sac_icm"
    )
    assert values == {"alpha_ci90_low_median": pytest.approx(-0.01), "skill_seed_share": 0.5}
    report = evaluate_gates(values, gate_sections(SKILL))
    assert report["passed"] and report["failed"] == [] and report["advisory_failed"] == ["skill"]
    assert report["gates"]["skill"]["status"] == "fail" and report["gates"]["skill"]["blocking"] is False
    blocking = evaluate_gates(values, gate_sections({"skill": {**SKILL["skill"], "blocking": True}}))
    assert not blocking["passed"] and blocking["failed"] == ["skill"]
    skilled = skill_values(_summary_with_alpha_lows({"X": 0.01}, {"X": 1.0}), "sac_icm")
    assert evaluate_gates(skilled, gate_sections(SKILL))["gates"]["skill"]["passed"]


def test_skill_gate_fails_rather_than_passes_on_a_summary_without_attribution():
    values = skill_values({"X": {"agents": {"sac_icm": {"kind": "agent"}}}}, "sac_icm")
    assert values == {"alpha_ci90_low_median": None, "skill_seed_share": None}
    gate = evaluate_gates(values, gate_sections({"skill": {**SKILL["skill"], "blocking": True}}))["gates"]["skill"]
    assert gate["status"] == "fail" and "undefined" in gate["reason"]


def test_flat_validation_metrics_carry_the_stitched_attribution_for_the_next_run_to_compare():
    entry = {
        "kind": "agent",
        "metrics": {},
        "positive_sharpe_share": 1.0,
        "psr_median": 0.9,
        "dsr_median": None,
        "stitched_attribution_median": {"alpha_annual": 0.02, "alpha_ci90_low": -0.01, "beta": 0.15, "alpha_t": 1.1},
    }
    summary = {"X": {"n_trials": 1, "agents": {"sac_icm": entry}}}
    metrics = validation_report({}, gate_sections({}), summary, regime_table(GOOD_REGIMES))["metrics"]
    assert metrics["walk_forward/X/sac_icm/stitched_alpha_ci90_low_median"] == -0.01
    assert metrics["walk_forward/X/sac_icm/stitched_beta_median"] == 0.15
    assert "walk_forward/X/sac_icm/stitched_alpha_t_median" not in metrics
