"""The end-of-run summary: what each phase's agent did next to capped buy-and-hold and random, its
collapse verdict, the gates with the failures named, where MLflow has the run and which files this
save version wrote.

Everything is read from the reports the phases already produced (their catalog outputs, by
dataset name); nothing is recomputed. ``summary_tables`` returns plain text for the log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trading_rl.evaluation.validation.gates import failure_message

Report = Mapping[str, Any]
METRICS = ("sharpe", "total_return", "max_drawdown")
BASELINES = ("buy_and_hold", "random")


@dataclass(frozen=True)
class AgentRow:
    phase: str
    agent: str
    metrics: Mapping[str, Any]
    baselines: Mapping[str, Mapping[str, Any]]
    verdict: str
    # the return attribution (evaluation.metrics.attribution keys); None: read it from ``metrics``
    attribution: Mapping[str, Any] | None = None
    # walk-forward rows: the standard errors and minimum detectable edges of the summary
    standard_errors: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class GateResult:
    phase: str
    report: str
    passed: bool | None  # None: not checked (e.g. forward without a promoted model or a new bar)
    failed: str  # the failed gates' names ("" when passed), for the table
    details: str  # the same with values and reasons, for the WARNING line


def _collapse_verdict(collapse: Report | None) -> str:
    if not collapse or "collapsed" not in collapse:
        return "n/a"
    return "COLLAPSED" if collapse["collapsed"] else "not collapsed"


def _sac_icm(reports: Mapping[str, Report]) -> list[AgentRow]:
    report = reports["sac_icm_evaluation_report"]
    verdict = _collapse_verdict(reports.get("sac_icm_collapse_report"))
    return [AgentRow("sac_icm", report["agent"], report["metrics"], report["baselines"], verdict)]


def _options_her(reports: Mapping[str, Report]) -> list[AgentRow]:
    report = reports["options_her_evaluation"]
    return [AgentRow("options_her", "options_her", report["agent"], report["baselines"], "n/a (option gates below)")]


def _reward_shaper(reports: Mapping[str, Report]) -> list[AgentRow]:
    report = reports["reward_shaping_report"]
    return [
        AgentRow(
            "reward_shaper",
            label,
            report[key]["metrics"],
            report["baselines"],
            _collapse_verdict(report[key].get("collapse")),
        )
        for key, label in (("shaped_agent", "reward_shaped"), ("source_agent", "sac_icm (source)"))
    ]


def _checkpoint_migration(reports: Mapping[str, Report]) -> list[AgentRow]:
    report = reports["migration_comparison"]
    rows = []
    for name, entry in report["checkpoints"].items():
        gate = entry["gate"]
        judged = gate["continuous_agent"]
        verdict = f"diversity gate {'passed' if gate['passed'] else 'FAILED'}"
        agreement = (entry.get("greedy_agreement") or {}).get(judged)  # absent from reports before it
        if agreement is not None:
            verdict += f"; same action level as the discrete policy on {agreement['agreement']:.0%} of its states"
        rows.append(
            AgentRow("checkpoint_migration", f"{name} {judged}", entry["agents"][judged], report["baselines"], verdict)
        )
    return rows


def _medians(entry: Report) -> dict[str, Any]:
    return {metric: (entry["metrics"].get(metric) or {}).get("median") for metric in METRICS}


def _walk_forward(reports: Mapping[str, Report]) -> list[AgentRow]:
    """Per agent two rows, named: the median of its windows' metrics, and the median over seeds of
    its stitched out-of-sample curve (the series the walk-forward tearsheet draws)."""
    rows = []
    for symbol, summary in reports["walk_forward_summary"].items():
        entries = summary["agents"]
        baselines = {name: _medians(entries[name]) for name in BASELINES if name in entries}
        stitched = {
            name: entries[name]["stitched_median"] for name in BASELINES if "stitched_median" in entries.get(name, {})
        }
        for agent, entry in entries.items():
            if entry["kind"] != "agent":
                continue
            share = entry.get("trading_share")
            verdict = "n/a" if share is None else f"trading in {share:.0%} of windows (fills on >= 2% of bars)"
            label = f"{agent} on {symbol}"
            rows.append(AgentRow("walk_forward", f"{label} (median of windows)", _medians(entry), baselines, verdict))
            if "stitched_median" in entry:
                # alpha, beta, exposure and their standard errors are measured on the stitched series
                rows.append(
                    AgentRow(
                        "walk_forward",
                        f"{label} (stitched, median of seeds)",
                        entry["stitched_median"],
                        stitched,
                        "",
                        attribution=entry.get("stitched_attribution_median") or {},
                        standard_errors={
                            **(entry.get("standard_errors") or {}),
                            "min_detectable": entry.get("min_detectable"),
                        },
                    )
                )
    return rows


def _final_evaluation(reports: Mapping[str, Report]) -> list[AgentRow]:
    report = reports["final_evaluation_report"]
    return [
        AgentRow(
            "final_evaluation",
            f"{report['agent']} on {report['symbol']} (test)",
            report["metrics"],
            report["baselines"],
            _collapse_verdict(report.get("collapse")),
        )
    ]


def _forward(reports: Mapping[str, Report]) -> list[AgentRow]:
    report = reports["forward_report"]
    if report.get("status") != "tracked":
        return []
    alerts = reports.get("forward_alerts") or {}
    verdict = "alerts: " + ", ".join(alerts["alerts"]) if alerts.get("alerts") else "no alert"
    agent = (
        f"deployed {report['model_version']} on {report['symbol']}, {report['n_bars']} bars since "
        f"{report['first_bar'][:10]} (+{report['new_bars']} new)"
    )
    return [AgentRow("forward", agent, report["metrics"], report["baselines"], verdict)]


# report dataset -> the rows it gives; the order is the order of the phases in the default run
AGENT_REPORTS: dict[str, Callable[[Mapping[str, Report]], list[AgentRow]]] = {
    "sac_icm_evaluation_report": _sac_icm,
    "options_her_evaluation": _options_her,
    "reward_shaping_report": _reward_shaper,
    "migration_comparison": _checkpoint_migration,
    "walk_forward_summary": _walk_forward,
    "forward_report": _forward,
    "final_evaluation_report": _final_evaluation,
}


def _failed(rows: Sequence[Report], name_key: str = "gate") -> str:
    return ", ".join(str(row[name_key]) for row in rows if not row["passed"])


def _collapse_gates(report: Report) -> tuple[bool, str, str]:
    failed = "; ".join(
        f"{mode}: {_failed(report[mode]['gates'])}"
        for mode in ("deterministic", "stochastic")
        if mode in report and report[mode].get("collapsed")
    )
    return not report["collapsed"], failed, failed


def _validation_gates(report: Report) -> tuple[bool, str, str]:
    message = failure_message(report)
    details = "" if message is None else message.removeprefix("validation gates failed: ")
    failed = ", ".join(report["failed"])
    advisory = report.get("advisory_failed") or []
    if advisory:  # judged and shown, but the report passes without them (``blocking: false``)
        failed = "; ".join(part for part in (failed, f"not blocking: {', '.join(advisory)}") if part)
    return report["passed"], failed, details


def _same(passed: bool, failed: str) -> tuple[bool, str, str]:
    return passed, failed, failed


def _skill_text(low: Any) -> str:
    return f"alpha's 90% lower bound {_signed_percent(low)} a year"


def _walk_forward_skill(report: Report) -> tuple[bool | None, str, str]:
    """The validation report's skill gate (``alpha_ci90_low_median > 0``, conf/base
    parameters_validation.yml) per agent and symbol: the median over seeds of alpha's 90% lower
    bound on the stitched out-of-sample series is above 0. Not checked for a summary without
    attribution (written before it existed)."""
    failed, details = [], []
    for symbol, summary in report.items():
        for agent, entry in summary["agents"].items():
            share = entry.get("skill_seed_share")
            if entry["kind"] != "agent" or share is None:
                continue
            low = (entry.get("stitched_attribution_median") or {}).get("alpha_ci90_low")
            if low is None or not low > 0:
                failed.append(f"skill ({agent} on {symbol})")
            details.append(f"{agent} on {symbol}: CI above 0 in {share:.0%} of seeds, median {_skill_text(low)}")
    if not details:
        return None, "", "no stitched attribution in the summary"
    return not failed, ", ".join(failed), "; ".join(details)


def _final_gates(report: Report) -> tuple[bool, str, str]:
    """The test split's verdicts: not collapsed, and skill (alpha's 90% CI above 0)."""
    collapse = report.get("collapse") or {}
    low = (report.get("metrics") or {}).get("alpha_ci90_low")
    checks = {
        "collapse": (not collapse.get("collapsed", False), _collapse_verdict(collapse)),
        "skill": (low is not None and low > 0, _skill_text(low)),
    }
    failed = ", ".join(name for name, (passed, _) in checks.items() if not passed)
    details = "; ".join(f"{name}: {text}" for name, (_, text) in checks.items())
    return not failed, failed, details


# report dataset -> (phase, reader of (passed, failed names, details)); validation last: its
# warning ends the run's log
GATE_REPORTS: dict[str, tuple[str, Callable[[Report], tuple[bool | None, str, str]]]] = {
    "sac_icm_collapse_report": ("sac_icm", _collapse_gates),
    "option_usage_report": (
        "options_her",
        lambda r: _same(bool(r.get("passed", True)), _failed(r.get("training_gates", []))),
    ),
    "reward_shaping_report": ("reward_shaper", lambda r: _same(bool(r["passed"]), _failed(r["weight_gates"]))),
    "migration_comparison": (
        "checkpoint_migration",
        lambda r: _same(
            bool(r["all_gates_passed"]),
            ", ".join(f"diversity ({name})" for name, e in r["checkpoints"].items() if not e["gate"]["passed"]),
        ),
    ),
    "walk_forward_summary": ("walk_forward", _walk_forward_skill),
    "final_evaluation_report": ("final_evaluation", _final_gates),
    "forward_alerts": ("forward", lambda r: (r["passed"], ", ".join(r["alerts"]) or r.get("reason", ""), "")),
    "validation_report": ("validation", _validation_gates),
}
SUMMARY_REPORTS = frozenset(AGENT_REPORTS) | frozenset(GATE_REPORTS)


def agent_rows(reports: Mapping[str, Report]) -> list[AgentRow]:
    return [row for name, read in AGENT_REPORTS.items() if name in reports for row in read(reports)]


def gate_results(reports: Mapping[str, Report]) -> list[GateResult]:
    results = []
    for name, (phase, read) in GATE_REPORTS.items():
        if name in reports:
            results.append(GateResult(phase, name, *read(reports[name])))
    return results


def _number(value: Any, percent: bool) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return "n/a"
    return f"{value:.1%}" if percent else f"{value:.2f}"


def _triple(metrics: Mapping[str, Any] | None) -> str:
    metrics = metrics or {}
    return " / ".join(_number(metrics.get(m), m != "sharpe") for m in METRICS)


def _signed_percent(value: Any) -> str:
    text = _number(value, percent=True)
    return text if text == "n/a" or text.startswith("-") else f"+{text}"


def alpha_text(attribution: Mapping[str, Any] | None) -> str:
    """``alpha [90% CI]`` per year, e.g. ``+2.1% [-3.0%, +7.2%]``."""
    attribution = attribution or {}
    low, high = attribution.get("alpha_ci90_low"), attribution.get("alpha_ci90_high")
    return f"{_signed_percent(attribution.get('alpha_annual'))} [{_signed_percent(low)}, {_signed_percent(high)}]"


def _exposure_text(attribution: Mapping[str, Any] | None) -> str:
    """``beta / mean exposure / Sharpe of the exposure-matched passive``."""
    attribution = attribution or {}
    return " / ".join(
        _number(attribution.get(key), False) for key in ("beta", "mean_exposure", "exposure_matched_sharpe")
    )


def _standard_error_lines(rows: Sequence[AgentRow]) -> list[str]:
    """What size of edge each walk-forward could have detected."""
    lines = []
    for row in rows:
        errors = row.standard_errors
        if not errors:
            continue
        detectable = errors.get("min_detectable") or {}
        lines.append(
            f"{row.agent}: Sharpe SE {_number(errors.get('sharpe_stitched'), False)} (a seed's stitched series), "
            f"{_number(errors.get('sharpe_median_windows'), False)} (median over windows); alpha SE "
            f"{_number(errors.get('alpha_stitched'), True)}/yr; smallest detectable (2 SE) Sharpe "
            f"{_number(detectable.get('sharpe_stitched'), False)}, "
            f"alpha {_number(detectable.get('alpha_stitched'), True)}/yr"
        )
    return lines


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def gate_result_text(passed: bool | None) -> str:
    return "not checked" if passed is None else "passed" if passed else "FAILED"


def deployment_lines(reports: Mapping[str, Report]) -> list[str]:
    """What ``forward`` traded: the registry version and why, or why nothing was checked."""
    report = reports.get("forward_report")
    if report is None:
        return []
    deployment = report.get("deployment") or {}
    if report.get("status") == "not checked":
        return ["", f"forward: not checked: {report.get('reason')}"]
    line = f"forward: deployed {deployment.get('reason', report.get('model_version'))}"
    if report.get("status") != "tracked":
        line += f"; not checked: no bar after its data end {report.get('deployed_data_end')} yet"
    return ["", line]


def summary_text(
    reports: Mapping[str, Report], mlflow_runs: Sequence[str] = (), paths: Mapping[str, Sequence[str]] | None = None
) -> str:
    """The summary as lines of text: agents next to baselines (Sharpe / return / max drawdown), the
    gates, the MLflow run(s) and the files this save version wrote, grouped (``paths``)."""
    lines = ["run summary", ""]
    rows = agent_rows(reports)
    if rows:
        lines += _table(
            [
                "phase",
                "agent",
                "agent S/ret/DD",
                "alpha/yr [90% CI]",
                "beta/exp/matched S",
                "buy_and_hold (capped)",
                "random",
                "collapse",
            ],
            [
                [
                    r.phase,
                    r.agent,
                    _triple(r.metrics),
                    alpha_text(r.metrics if r.attribution is None else r.attribution),
                    _exposure_text(r.metrics if r.attribution is None else r.attribution),
                    _triple(r.baselines.get("buy_and_hold")),
                    _triple(r.baselines.get("random")),
                    r.verdict,
                ]
                for r in rows
            ],
        )
        lines.append("(S/ret/DD: annualised Sharpe / total return / max drawdown on the phase's evaluation split)")
        lines.append(
            "(alpha: annualised intercept of the agent's returns on the market line's, Newey-West 90% CI; beta: "
            "its slope; exp: mean exposure; matched S: Sharpe of the market held at that exposure, same costs; "
            "walk_forward: medians over seeds' stitched series)"
        )
        lines += _standard_error_lines(rows)
    else:
        lines.append("no agent was evaluated in this run")
    gates = gate_results(reports)
    if gates:
        lines += [
            "",
            *_table(
                ["phase", "gate report", "result", "failed"],
                [[g.phase, g.report, gate_result_text(g.passed), g.failed or "-"] for g in gates],
            ),
        ]
    lines += deployment_lines(reports)
    lines += ["", *(f"mlflow: {run}" for run in mlflow_runs)] if mlflow_runs else ["", "mlflow: no run was active"]
    for group, group_paths in (paths or {}).items():
        if group_paths:
            lines += ["", f"{group}:", *(f"  {path}" for path in group_paths)]
    return "\n".join(lines)
