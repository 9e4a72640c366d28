"""The chain benchmark's tables: per family x agent capture, skill and Sharpe, each agent paired with
its input agent (same market, seed and evaluation split), the issue's verdicts, the markdown table
and the plot. Pure functions of the per-run rows ``chain_controls.py`` writes (one row per family x
realisation x seed x agent), so they are tested on tiny tables and rerun on a saved CSV.

A row carries at least ``family``, ``realisation``, ``seed``, ``agent``, ``input`` (the agent it was
built from, empty for the chain's root), ``capture`` (agent IR / oracle IR on the evaluation split;
NaN on a null market), ``skill`` (alpha's 90% lower bound > 0), ``agent_sharpe`` and ``agent_ir``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from controls import CAPTURE_BAR, NULL_FALSE_POSITIVE, SEED_FLOOR, bootstrap_median_ci

# The bar for a later phase: its paired capture >= 90% of its input agent's.
PAIRED_SHARE = 0.9
PAIR_KEYS = ["family", "market", "realisation", "seed"]


def paired_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Every run of an agent that has an input next to its input's run on the same market and seed:
    ``capture`` and ``capture_input``, ``skill`` and ``skill_input``, their difference ``delta``."""
    with_input = rows[rows["input"].fillna("").astype(str) != ""]
    inputs = rows[PAIR_KEYS + ["agent", "capture", "skill", "agent_ir"]].rename(
        columns={"agent": "input", "capture": "capture_input", "skill": "skill_input", "agent_ir": "agent_ir_input"}
    )
    joined = with_input.merge(inputs, on=PAIR_KEYS + ["input"], how="inner")
    missing = len(with_input) - len(joined)
    if missing:
        raise ValueError(f"{missing} run(s) have no run of their input agent on the same market and seed")
    return joined.assign(delta=joined["capture"] - joined["capture_input"])


def _finite(values: pd.Series) -> np.ndarray:
    array = values.to_numpy(dtype=float)
    return array[np.isfinite(array)]


def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if values.size else float("nan")


def summarise_agents(rows: pd.DataFrame, order: list[str] | None = None) -> pd.DataFrame:
    """One row per family x agent: runs, capture median [bootstrap 90% CI] and min, skill passes and
    rate, median Sharpe and IR; against the input agent: the paired capture difference's median
    [90% CI] and the agent's median capture over its input's on the same runs; the verdict."""
    rng = np.random.default_rng(0)
    pairs = paired_rows(rows)
    agents = order or list(dict.fromkeys(rows["agent"]))
    out = []
    for family, group in rows.groupby("family", sort=False):
        for agent in [name for name in agents if name in set(group["agent"])]:
            mine = group[group["agent"] == agent]
            capture = _finite(mine["capture"])
            low, high = bootstrap_median_ci(capture, rng)
            row = {
                "family": family,
                "agent": agent,
                "input": str(mine["input"].fillna("").iloc[0]),
                "runs": int(len(mine)),
                "capture_median": _median(capture),
                "capture_ci90_low": low,
                "capture_ci90_high": high,
                "capture_min": float(capture.min()) if capture.size else float("nan"),
                "skill_passes": int(mine["skill"].astype(bool).sum()),
                "skill_rate": float(mine["skill"].astype(bool).mean()),
                "sharpe_median": float(mine["agent_sharpe"].median()),
                "ir_median": float(mine["agent_ir"].median()),
            }
            row.update(_paired_summary(pairs[(pairs["family"] == family) & (pairs["agent"] == agent)], rng))
            row["verdict"] = verdict(row, family)
            out.append(row)
    return pd.DataFrame(out)


def _paired_summary(pairs: pd.DataFrame, rng: np.random.Generator) -> dict:
    delta = _finite(pairs["delta"])
    low, high = bootstrap_median_ci(delta, rng)
    input_median = _median(_finite(pairs["capture_input"]))
    own_median = _median(_finite(pairs["capture"]))
    share = own_median / input_median if input_median > 0 else float("nan")
    return {
        "pairs": int(delta.size) if len(pairs) else 0,
        "delta_median": _median(delta),
        "delta_ci90_low": low,
        "delta_ci90_high": high,
        "input_capture_median": input_median,
        "share_of_input": share,
    }


def verdict(row: dict, family: str) -> str:
    """``pass``/``fail`` against the issue's bar: on an edge family median capture >= 0.5, none below
    0.25 and (with an input) paired capture >= 90% of the input's; on null skill in <= 10% of runs."""
    if family == "null":
        return "pass" if row["skill_rate"] <= NULL_FALSE_POSITIVE else "fail"
    if not np.isfinite(row["capture_median"]):
        return "n/a"
    problems = []
    if row["capture_median"] < CAPTURE_BAR:
        problems.append("median")
    if row["capture_min"] < SEED_FLOOR:
        problems.append("floor")
    if row.get("pairs") and not paired_kept(row):
        problems.append("paired")
    return "pass" if not problems else "fail: " + ", ".join(problems)


def paired_kept(row: dict) -> bool:
    """The agent kept its input's capture: >= 90% of the input's median where that is positive; where
    the input took nothing (median <= 0), a paired difference that is not negative."""
    if row["input_capture_median"] > 0:
        return bool(row["share_of_input"] >= PAIRED_SHARE)
    return bool(row["delta_median"] >= 0)


# The columns a risk control is judged on, each paired with the input agent's (chain_probes adds the
# drawdown, exposure and timing columns; the timing ones only on a risk family).
RISK_METRICS = ("agent_sharpe", "max_drawdown", "capture", "oracle_exposure_corr", "mean_abs_exposure")


def paired_metrics(rows: pd.DataFrame, metrics=RISK_METRICS) -> pd.DataFrame:
    """One row per family x agent with an input: for each of ``metrics`` in ``rows``, the agent's
    median and the median paired difference agent - input on the same market and seed [bootstrap
    90% CI]; and how many of its runs went flat or collapsed (where those columns exist)."""
    rng = np.random.default_rng(0)
    present = [name for name in metrics if name in rows]
    inputs = rows[PAIR_KEYS + ["agent", *present]].rename(
        columns={"agent": "input", **{name: f"{name}_input" for name in present}}
    )
    pairs = rows[rows["input"].fillna("").astype(str) != ""].merge(inputs, on=PAIR_KEYS + ["input"], how="inner")
    out = []
    for (family, agent), group in pairs.groupby(["family", "agent"], sort=False):
        row: dict = {"family": family, "agent": agent, "input": group["input"].iloc[0], "pairs": len(group)}
        for name in present:
            delta = _finite(group[name] - group[f"{name}_input"])
            low, high = bootstrap_median_ci(delta, rng)
            row.update(
                {
                    name: _median(_finite(group[name])),
                    f"{name}_input": _median(_finite(group[f"{name}_input"])),
                    f"{name}_delta": _median(delta),
                    f"{name}_delta_ci90_low": low,
                    f"{name}_delta_ci90_high": high,
                }
            )
        for flag in ("went_flat", "collapsed"):
            if flag in group:
                row[flag] = int(group[flag].fillna(False).astype(bool).sum())
        out.append(row)
    return pd.DataFrame(out)


def paired_metrics_table(paired: pd.DataFrame) -> str:
    """``paired_metrics`` as markdown: per metric the agent's median, its input's, and the paired
    difference [90% CI]."""
    present = [name for name in RISK_METRICS if f"{name}_delta" in paired]
    flags = [flag for flag in ("went_flat", "collapsed") if flag in paired]
    header = ["family", "agent", "input", "pairs", *(f"{name}: agent / input, Δ [90% CI]" for name in present), *flags]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in paired.to_dict("records"):
        cells = [row["family"], row["agent"], row["input"], str(row["pairs"])]
        for name in present:
            cells.append(
                f"{_number(row[name], 3)} / {_number(row[f'{name}_input'], 3)}, {_number(row[f'{name}_delta'], 3)} "
                f"[{_number(row[f'{name}_delta_ci90_low'], 3)}, {_number(row[f'{name}_delta_ci90_high'], 3)}]"
            )
        cells += [f"{row[flag]}/{row['pairs']}" for flag in flags]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


ALIGNMENT = "option_regime_mi"  # chain_probes.option_alignment_columns' prefix
ALIGNMENT_P = 0.05


def alignment_table(rows: pd.DataFrame) -> str:
    """Options' regime alignment per family x agent (runs with ``option_regime_*`` columns): the
    active option's share of the regime's entropy, median [90% CI]; its mutual information above
    the median of its circular-shift control (nats: the estimator's bias is in both), median [90%
    CI] over runs; the runs whose own shift test has p < 0.05; the dominant options. Empty without
    those columns (no options agent, or no regime family)."""
    if f"{ALIGNMENT}_share" not in rows:
        return ""
    rng = np.random.default_rng(0)
    scored = rows[np.isfinite(rows[f"{ALIGNMENT}_share"].to_numpy(dtype=float))]
    lines = [
        "| family | agent | runs | regime information shared, median [90% CI] | MI − shifted control's median, "
        f"nats [90% CI] | p < {ALIGNMENT_P} | dominant option (runs), share |",
        "|---|---|---|---|---|---|---|",
    ]
    for (family, agent), group in scored.groupby(["family", "agent"], sort=False):
        share = _finite(group[f"{ALIGNMENT}_share"]) * 100
        excess = _finite(group[ALIGNMENT] - group[f"{ALIGNMENT}_null_median"])
        share_low, share_high = bootstrap_median_ci(share, rng)
        excess_low, excess_high = bootstrap_median_ci(excess, rng)
        dominant = ", ".join(f"{name} ({count})" for name, count in group["dominant_option"].value_counts().items())
        lines.append(
            f"| {family} | {agent} | {len(group)} | {_number(_median(share), 1)}% [{_number(share_low, 1)}, "
            f"{_number(share_high, 1)}] | {_median(excess):+.4f} [{excess_low:+.4f}, {excess_high:+.4f}] "
            f"| {int((group['option_regime_p'] < ALIGNMENT_P).sum())}/{len(group)} | {dominant}; "
            f"{group['dominant_option_share'].min():.2f}–{group['dominant_option_share'].max():.2f} |"
        )
    return "\n".join(lines) + "\n"


def _number(value: float, digits: int = 2) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def markdown_table(summary: pd.DataFrame) -> str:
    """The summary as a markdown table (captures as shares of the oracle's IR)."""
    lines = [
        "| family | agent | input | runs | capture, median [90% CI] | min | skill | Sharpe | "
        "paired Δ capture vs input [90% CI] | ÷ input's | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in summary.to_dict("records"):
        capture = (
            f"{_number(row['capture_median'])} [{_number(row['capture_ci90_low'])}, "
            f"{_number(row['capture_ci90_high'])}]"
        )
        paired = (
            f"{_number(row['delta_median'], 2)} [{_number(row['delta_ci90_low'])}, {_number(row['delta_ci90_high'])}]"
            if row["pairs"]
            else "—"
        )
        lines.append(
            f"| {row['family']} | {row['agent']} | {row['input'] or '—'} | {row['runs']} | {capture} | "
            f"{_number(row['capture_min'])} | {row['skill_passes']}/{row['runs']} | {_number(row['sharpe_median'])} | "
            f"{paired} | {_number(row['share_of_input'])} | {row['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: pd.DataFrame, path, order: list[str] | None = None) -> None:
    """One panel per edge family: every run's capture per agent (dots, paired runs joined to their
    input's by a line) and the median (bar)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edge = rows[rows["family"] != "null"]
    families = list(dict.fromkeys(edge["family"])) or ["null"]
    agents = order or list(dict.fromkeys(rows["agent"]))
    figure, axes = plt.subplots(1, len(families), figsize=(1.2 + 1.1 * len(agents) * len(families), 4.6), dpi=110)
    axes = np.atleast_1d(axes)
    position = {agent: index for index, agent in enumerate(agents)}
    pairs = paired_rows(edge) if len(edge) else edge
    for axis, family in zip(axes, families):
        mine = edge[edge["family"] == family]
        for _, pair in pairs[pairs["family"] == family].iterrows():
            axis.plot(
                [position[pair["input"]], position[pair["agent"]]],
                [pair["capture_input"], pair["capture"]],
                color="grey",
                alpha=0.25,
                linewidth=0.7,
            )
        for agent, group in mine.groupby("agent", sort=False):
            x = position[agent] + np.linspace(-0.12, 0.12, len(group))
            axis.scatter(x, group["capture"], s=14, zorder=3)
            axis.hlines(group["capture"].median(), position[agent] - 0.3, position[agent] + 0.3, color="black")
        axis.axhline(CAPTURE_BAR, color="grey", linestyle="--", linewidth=1)
        axis.axhline(0.0, color="black", linewidth=0.6)
        axis.set_xticks(range(len(agents)), agents, rotation=35, ha="right", fontsize=8)
        axis.set_title(f"{family}: capture per run (line: paired with its input)", fontsize=9)
        axis.set_ylabel("agent IR / oracle IR (evaluation split)")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
