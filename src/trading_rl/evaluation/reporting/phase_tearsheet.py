"""The tearsheet of a phase: what a phase's ``sections`` function returns (``TearsheetInput``), the
rollouts and the single-env section most phases show, and the rendering into a table of rollouts, one
figure per section and a self-contained HTML page (``render_tearsheet``). The Kedro node around them
is ``pipelines.tearsheet.tearsheet_node``."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import pandas as pd

from trading_rl.envs import EnvSpec
from trading_rl.evaluation.ledger.ledger import Period, trials_for
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
from trading_rl.evaluation.reporting.summary import gate_results
from trading_rl.evaluation.reporting.tearsheet import EMPTY_PAGE_MARK, Verdict, build_tearsheet
from trading_rl.evaluation.reporting.tearsheet_panels import TearsheetOptions, TearsheetParams
from trading_rl.evaluation.reporting.tearsheet_section import TearsheetSection, env_section
from trading_rl.evaluation.validation.regimes import RegimeValidationParams


@dataclass
class TearsheetInput:
    """What a phase's ``sections`` function returns."""

    title: str
    hold_threshold: float
    sections: Sequence[TearsheetSection]


def sb3_rollouts(models: Mapping[str, Any], make_env: Callable[[], gym.Env], seed: int) -> dict[str, pd.DataFrame]:
    """The deterministic run of every SB3 model on a fresh ``make_env()`` reset with ``seed``."""
    return {
        name: run_episode(make_env(), policy_from_sb3(model, deterministic=True), seed=seed)
        for name, model in models.items()
    }


def env_tearsheet(
    phase: str,
    agents: Mapping[str, pd.DataFrame],
    env_spec: EnvSpec,
    split: str,
    make_env: Callable[[], gym.Env],
    seed: int,
    regime_validation: RegimeValidationParams,
    env_overrides: Mapping[str, Any] | None = None,
) -> TearsheetInput:
    """One section: ``agents`` (rollouts on ``make_env``'s episode) next to the baselines on it;
    ``env_overrides``: those ``make_env`` applies to ``env_spec``'s config."""
    title = f"{phase}: {env_spec.symbol}, {split} split"
    config = env_spec.env_config(**dict(env_overrides or {}))
    section = env_section(
        title,
        env_spec.symbol,
        env_spec.periods_per_year,
        agents,
        make_env,
        env_spec.closes,
        seed,
        regime_validation.regimes,
    )
    section.facts.update(
        {
            "costs": f"commission {config.commission_rate:.3%} + slippage {config.slippage_rate:.3%} of each fill, "
            f"fills at the {config.fill.replace('_', ' ')}",
            "position cap": f"{config.max_position_pct:.0%} of equity (buy-and-hold is capped alike; the market "
            "line is not)" + ("; shorts allowed" if config.allow_short else ""),
        }
    )
    return TearsheetInput(title, config.hold_threshold, [section])


def verdicts_of(reports: Mapping[str, Any]) -> list[Verdict]:
    """The banner lines of a phase's gate reports (collapse, option usage, shaping, migration
    diversity, forward alerts), read as the run summary reads them."""
    return [
        Verdict(gate.report, gate.passed, gate.details or gate.failed)
        for gate in gate_results({name: report for name, report in reports.items() if report is not None})
    ]


def render_tearsheet(
    spec: TearsheetInput,
    config: TearsheetParams,
    ledger: pd.DataFrame,
    run_metadata: dict[str, Any],
    gate_reports: Mapping[str, Any] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any], str]:
    """``(rollouts, {"<section>.png": figure}, html)`` of ``spec``; DSR counts the ledger's trials. A
    spec without sections (a phase with nothing to show yet, e.g. no forward bars) gives an empty
    table, one figure and a page that say so under the spec's title."""
    if not spec.sections:
        # imported here: registering the pipelines (every kedro command) must not pay for it
        import matplotlib.pyplot as plt

        figure = plt.figure(figsize=(6, 1))
        figure.text(0.5, 0.5, spec.title, ha="center", va="center")
        title = html.escape(spec.title)
        page = (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{EMPTY_PAGE_MARK}'
            f"<title>{title}</title></head>"
            f"<body><h1>{title}</h1></body></html>\n"
        )
        return pd.DataFrame(columns=["section", "kind", "agent", "step"]), {"status.png": figure}, page
    options = TearsheetOptions(spec.hold_threshold, config.rolling_window, config.dpi)
    header = {k: run_metadata.get(k) for k in ("save_version", "seed", "config_hash", "git_commit")}
    trials = {}
    for section in spec.sections:  # the trials evaluated on the section's own bars (docs/protocol.md)
        steps = section.primary[1]["timestamp"]
        trials[section.symbol] = trials_for(ledger, section.symbol, Period.of(steps.min(), steps.max()))
    tearsheet = build_tearsheet(spec.title, spec.sections, options, trials, header, verdicts_of(gate_reports or {}))
    return tearsheet.rollouts, tearsheet.figures, tearsheet.html
