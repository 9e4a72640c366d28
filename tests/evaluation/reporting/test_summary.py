"""The end-of-run summary reads each phase's report shape; gates are named, long reasons kept for
the WARNING line only."""

from helpers.gates import gate_sections

from trading_rl.evaluation.reporting.summary import agent_rows, gate_results, summary_text
from trading_rl.evaluation.validation.gates import evaluate_gates

BASELINES = {
    "buy_and_hold": {"sharpe": 0.5, "total_return": 0.02, "max_drawdown": -0.03},
    "random": {"sharpe": -0.7, "total_return": -0.01, "max_drawdown": -0.04},
}


def _quartiles(median):
    return {"median": median, "q1": median, "q3": median}


WALK_FORWARD = {
    "sp500": {
        "agents": {
            "sac_icm": {
                "kind": "agent",
                "trading_share": 0.25,
                "metrics": {
                    "sharpe": _quartiles(1.1),
                    "total_return": _quartiles(0.03),
                    "max_drawdown": _quartiles(-0.02),
                },
            },
            "buy_and_hold": {
                "kind": "baseline",
                "trading_share": None,
                "metrics": {
                    "sharpe": _quartiles(0.4),
                    "total_return": _quartiles(0.01),
                    "max_drawdown": _quartiles(-0.05),
                },
            },
        }
    }
}
MIGRATION = {
    "checkpoints": {
        "a.zip": {
            "agents": {"migrated": {"sharpe": None, "total_return": 0.0, "max_drawdown": 0.0}},
            "gate": {"continuous_agent": "migrated", "passed": False},
        }
    },
    "baselines": BASELINES,
    "all_gates_passed": False,
}


def test_every_phase_report_gives_its_rows():
    rows = agent_rows(
        {
            "walk_forward_summary": WALK_FORWARD,
            "migration_comparison": MIGRATION,
            "options_her_evaluation": {"agent": BASELINES["random"], "baselines": BASELINES},
        }
    )
    assert [(r.phase, r.agent, r.verdict) for r in rows] == [
        ("options_her", "options_her", "n/a (option gates below)"),
        ("checkpoint_migration", "a.zip migrated", "diversity gate FAILED"),
        ("walk_forward", "sac_icm on sp500 (median of windows)", "trading in 25% of windows (fills on >= 2% of bars)"),
    ]
    assert rows[2].metrics == {"sharpe": 1.1, "total_return": 0.03, "max_drawdown": -0.02}
    assert rows[2].baselines["buy_and_hold"]["sharpe"] == 0.4 and "random" not in rows[2].baselines
    text = summary_text({"walk_forward_summary": WALK_FORWARD})
    assert "1.10 / 3.0% / -2.0%" in text and "0.40 / 1.0% / -5.0%" in text and "n/a / n/a / n/a" in text


def test_the_migration_row_says_how_often_the_judged_agent_acts_like_the_discrete_policy():
    entry = {**MIGRATION["checkpoints"]["a.zip"], "greedy_agreement": {"migrated": {"agreement": 0.42}}}
    [row] = agent_rows({"migration_comparison": {**MIGRATION, "checkpoints": {"a.zip": entry}}})
    assert row.verdict == "diversity gate FAILED; same action level as the discrete policy on 42% of its states"


def test_the_walk_forward_shows_window_medians_and_stitched_curves_each_named():
    stitched = {
        symbol: {
            "agents": {
                name: {**entry, "stitched_median": {"sharpe": s, "total_return": 0.05, "max_drawdown": -0.04}}
                for (name, entry), s in zip(summary["agents"].items(), (0.81, 0.93))
            }
        }
        for symbol, summary in WALK_FORWARD.items()
    }
    medians, curves = agent_rows({"walk_forward_summary": stitched})
    assert (medians.agent, curves.agent) == (
        "sac_icm on sp500 (median of windows)",
        "sac_icm on sp500 (stitched, median of seeds)",
    )
    assert medians.metrics["sharpe"] == 1.1 and medians.baselines["buy_and_hold"]["sharpe"] == 0.4
    assert curves.metrics["sharpe"] == 0.81 and curves.baselines["buy_and_hold"]["sharpe"] == 0.93
    assert "0.81 / 5.0% / -4.0%" in summary_text({"walk_forward_summary": stitched})


def test_gates_are_named_in_the_table_and_explained_in_the_details():
    report = evaluate_gates(
        {"sharpe_median": 0.1, "max_drawdown_median": 0.05},
        gate_sections(
            {
                "sharpe": {"metric": "sharpe_median", "comparison": ">", "threshold": 0.5},
                "max_drawdown": {"metric": "max_drawdown_median", "comparison": "<", "threshold": 0.15},
            }
        ),
    )
    (migration, validation) = gate_results({"validation_report": report, "migration_comparison": MIGRATION})
    assert (migration.phase, migration.passed, migration.failed) == ("checkpoint_migration", False, "diversity (a.zip)")
    assert validation.failed == "sharpe" and validation.details == "sharpe (0.1 > 0.5 is false)"
    assert "validation  validation_report  FAILED  sharpe\n" in summary_text({"validation_report": report})


FORWARD = {
    "status": "tracked",
    "model_version": "2026-01-31T06.00.00.000Z",
    "symbol": "sp500",
    "n_bars": 40,
    "new_bars": 20,
    "first_bar": "2016-01-04T00:00:00",
    "metrics": {"sharpe": 0.3, "total_return": 0.01, "max_drawdown": -0.02},
    "baselines": BASELINES,
}


def test_the_forward_record_gets_a_line_and_its_alerts_a_gate_row():
    alerts = {"passed": False, "alerts": ["feature_drift", "psr"]}
    reports = {"forward_report": FORWARD, "forward_alerts": alerts}
    [row] = agent_rows(reports)
    assert row.phase == "forward" and row.verdict == "alerts: feature_drift, psr"
    assert row.agent == "deployed 2026-01-31T06.00.00.000Z on sp500, 40 bars since 2016-01-04 (+20 new)"
    [gate] = gate_results(reports)
    assert (gate.phase, gate.passed, gate.failed) == ("forward", False, "feature_drift, psr")
    assert "0.30 / 1.0% / -2.0%" in summary_text(reports)
    assert agent_rows({"forward_report": {"status": "no deployed model"}}) == []


ATTRIBUTED = {
    "sharpe": 0.8,
    "total_return": 0.05,
    "max_drawdown": -0.03,
    "alpha_annual": 0.021,
    "alpha_ci90_low": -0.03,
    "alpha_ci90_high": 0.072,
    "beta": 0.15,
    "mean_exposure": 0.14,
    "exposure_matched_sharpe": 0.41,
}


def test_alpha_with_its_ci_beta_exposure_and_the_matched_baseline_stand_next_to_sharpe():
    reports = {"sac_icm_evaluation_report": {"agent": "sac_icm", "metrics": ATTRIBUTED, "baselines": BASELINES}}
    text = summary_text(reports)
    header, _, row = text.splitlines()[2:5]
    assert header.index("agent S/ret/DD") < header.index("alpha/yr [90% CI]") < header.index("beta/exp/matched S")
    assert "0.80 / 5.0% / -3.0%  +2.1% [-3.0%, +7.2%]  0.15 / 0.14 / 0.41" in row
    # a report from before attribution existed reads n/a rather than failing
    old = summary_text(
        {"sac_icm_evaluation_report": {**reports["sac_icm_evaluation_report"], "metrics": BASELINES["random"]}}
    )
    assert "n/a [n/a, n/a]" in old and "n/a / n/a / n/a" in old


def test_the_stitched_row_carries_the_stitched_attribution_and_the_standard_errors():
    """Alpha, beta and exposure are measured on the stitched series: they stand on its row, and the
    median-of-windows row, which no attribution describes, reads n/a."""
    entry = {
        **WALK_FORWARD["sp500"]["agents"]["sac_icm"],
        "stitched_median": {"sharpe": 0.81, "total_return": 0.05, "max_drawdown": -0.04},
        "stitched_attribution_median": {**ATTRIBUTED, "sharpe": 99.0},
        "standard_errors": {"sharpe_stitched": 0.62, "alpha_stitched": 0.041, "sharpe_median_windows": 0.5},
        "min_detectable": {"sharpe_stitched": 1.24, "alpha_stitched": 0.082},
    }
    summary = {"sp500": {"agents": {**WALK_FORWARD["sp500"]["agents"], "sac_icm": entry}}}
    windows, stitched = agent_rows({"walk_forward_summary": summary})
    assert windows.metrics["sharpe"] == 1.1 and not windows.attribution and not windows.standard_errors
    assert stitched.metrics["sharpe"] == 0.81  # the stitched series' Sharpe, not the attribution's
    text = summary_text({"walk_forward_summary": summary})
    windows_line, stitched_line = (line for line in text.splitlines() if "walk_forward  sac_icm on sp500 (" in line)
    assert "n/a [n/a, n/a]" in windows_line
    assert "0.81 / 5.0% / -4.0%  +2.1% [-3.0%, +7.2%]  0.15 / 0.14 / 0.41" in stitched_line
    assert (
        "sac_icm on sp500 (stitched, median of seeds): Sharpe SE 0.62 (a seed's stitched series), "
        "0.50 (median over windows); alpha SE 4.1%/yr; smallest detectable (2 SE) Sharpe 1.24, alpha 8.2%/yr"
    ) in text


def test_a_failed_gate_that_does_not_block_is_shown_but_the_report_passes():
    report = evaluate_gates(
        {"alpha_ci90_low_median": -0.01},
        gate_sections(
            {"skill": {"metric": "alpha_ci90_low_median", "comparison": ">", "threshold": 0.0, "blocking": False}}
        ),
    )
    [validation] = gate_results({"validation_report": report})
    assert validation.passed and validation.failed == "not blocking: skill" and validation.details == ""


def test_the_walk_forward_skill_gate_reads_the_stitched_attribution_per_agent_and_symbol():
    def summary(share_sp500, share_nasdaq, low_nasdaq=-0.012):
        def entry(share, low):
            return {
                **WALK_FORWARD["sp500"]["agents"]["sac_icm"],
                "skill_seed_share": share,
                "stitched_attribution_median": {"alpha_ci90_low": low},
            }

        return {
            "sp500": {"agents": {"sac_icm": entry(share_sp500, 0.004), **BASELINE_ENTRY}},
            "nasdaq": {"agents": {"sac_icm": entry(share_nasdaq, low_nasdaq), **BASELINE_ENTRY}},
        }

    [gate] = gate_results({"walk_forward_summary": summary(1.0, 0.5)})
    assert (gate.phase, gate.passed, gate.failed) == ("walk_forward", False, "skill (sac_icm on nasdaq)")
    assert "sac_icm on sp500: CI above 0 in 100% of seeds, median alpha's 90% lower bound +0.4% a year" in gate.details
    assert "sac_icm on nasdaq: CI above 0 in 50% of seeds, median alpha's 90% lower bound -1.2% a year" in gate.details
    [gate] = gate_results({"walk_forward_summary": summary(0.6, 0.8, low_nasdaq=0.001)})
    assert gate.passed is True and gate.failed == ""
    [gate] = gate_results({"walk_forward_summary": WALK_FORWARD})  # written before attribution existed
    assert gate.passed is None


BASELINE_ENTRY = {"buy_and_hold": WALK_FORWARD["sp500"]["agents"]["buy_and_hold"]}


def test_the_final_evaluation_gate_is_collapse_and_skill_on_the_test_split():
    def report(collapsed, low):
        return {"collapse": {"collapsed": collapsed}, "metrics": {"alpha_ci90_low": low}}

    [gate] = gate_results({"final_evaluation_report": report(False, 0.01)})
    assert (gate.phase, gate.passed, gate.failed) == ("final_evaluation", True, "")
    [gate] = gate_results({"final_evaluation_report": report(True, -0.02)})
    assert (gate.passed, gate.failed) == (False, "collapse, skill")
    assert gate.details == "collapse: COLLAPSED; skill: alpha's 90% lower bound -2.0% a year"
    [gate] = gate_results({"final_evaluation_report": report(False, None)})  # alpha undefined: no skill shown
    assert gate.failed == "skill"
