"""A/B of the sac_icm phase over seeds: plain SAC vs SAC+ICM at the chosen Kedro env's budget.

Both variants use the ``sac_icm`` parameters of ``--env`` (only ``icm.enabled`` differs), train on
the latest ``env_spec`` from the catalog and are evaluated on the validation split next to the
baselines (same env, same costs). Prints one row per variant × seed, the medians per variant,
writes everything as JSON to ``--out`` and appends one trial-ledger row per variant (``--ledger``).

    python benchmarks/ab_sac_icm.py [--env base] [--seeds 0 1 2] [--jobs 1] [--out ab_sac_icm.json]
                                    [--inputs DIR | --dump-inputs DIR] [--ledger DIR | --no-ledger]

Needs a finished ``kedro run --pipelines feature_extraction,env_construction`` (or ``--inputs``).
"""

from __future__ import annotations

import copy
import tempfile
import time
from functools import partial

from ab_common import check_test_unspent, load_inputs, parse_args, record_trials, report, run_all

VARIANTS = {"SAC": False, "SAC+ICM": True}  # name -> icm.enabled


def _agent_params(params: dict, icm: bool) -> dict:
    agent_params = copy.deepcopy(params["sac_icm"]["agent"])
    agent_params.setdefault("icm", {})["enabled"] = icm
    return agent_params


def run_one(spec, params: dict, icm: bool, seed: int, final: bool = False) -> dict:
    import torch

    from trading_rl.algorithms.sac_icm.sac_icm import build_agent
    from trading_rl.evaluation.ledger.final import model_digest
    from trading_rl.evaluation.metrics.report import evaluate_policy
    from trading_rl.evaluation.metrics.rollout import policy_from_sb3
    from trading_rl.monitoring.collapse import CollapseThresholds
    from trading_rl.training.loop import train_agent
    from trading_rl.training.params import AgentParams

    torch.set_num_threads(1)
    agent_params = _agent_params(params, icm)
    started = time.perf_counter()
    model = build_agent(
        spec.make_env("train", seed=seed),
        AgentParams.from_mapping(agent_params, "sac_icm.agent"),
        seed=seed,
        device="cpu",
    )
    with tempfile.TemporaryDirectory() as work_dir:
        outcome = train_agent(
            model,
            partial(spec.make_env, "validation"),
            AgentParams.from_mapping(agent_params, "sac_icm.agent"),
            work_dir,
            spec.periods_per_year,
        )

    def evaluate_on(split: str):
        return evaluate_policy(
            "sac_icm" if icm else "sac",
            policy_from_sb3(outcome.model, deterministic=True),
            policy_from_sb3(outcome.model, deterministic=False),
            partial(spec.make_env, split),
            spec.periods_per_year,
            seed=seed,
            thresholds=CollapseThresholds(),
        )

    evaluation, collapse = evaluate_on("validation")
    metrics = evaluation["metrics"]
    test = {}
    if final:
        # The same (validation-selected) agent, scored once on the test split.
        test_evaluation, _ = evaluate_on("test")
        test_metrics = test_evaluation["metrics"]
        test = {
            "model_sha256": model_digest(outcome.model),
            "test_start": test_evaluation["start"],
            "test_end": test_evaluation["end"],
            "test_sharpe": test_metrics["sharpe"],
            "test_total_return": test_metrics["total_return"],
            "test_max_drawdown": test_metrics["max_drawdown"],
            "test_trade_rate": test_metrics["n_trades"] / test_metrics["n_steps"],
            "test_return_moments": test_evaluation["return_moments"],
            "test_baselines": test_evaluation["baselines"],
        }
    return {
        "variant": "SAC+ICM" if icm else "SAC",
        "seed": seed,
        "split": "validation",
        "val_sharpe": metrics["sharpe"],
        "val_total_return": metrics["total_return"],
        "val_max_drawdown": metrics["max_drawdown"],
        "action_entropy": metrics["action_entropy"],
        "trade_rate": metrics["n_trades"] / metrics["n_steps"],
        "hold_share": metrics["hold_share"],
        "stochastic_entropy": evaluation["stochastic_metrics"]["action_entropy"],
        "collapsed_deterministic": collapse["deterministic"]["collapsed"],
        "train_seconds": time.perf_counter() - started,
        "return_moments": evaluation["return_moments"],
        "start": evaluation["start"],
        "end": evaluation["end"],
        "baselines": evaluation["baselines"],
        **test,
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], "ab_sac_icm.json")
    spec, params, _ = load_inputs(args)
    from trading_rl.training.params import AgentParams

    configurations = {  # the parameters as they act: run-time keys and switched-off sections left out
        name: {
            "agent_params": AgentParams.identity_view(
                AgentParams.from_mapping(_agent_params(params, icm), "sac_icm.agent").to_dict()
            )
        }
        for name, icm in VARIANTS.items()
    }
    repeat = check_test_unspent(args, "ab_sac_icm", spec, configurations) if args.final else False
    jobs = [(spec, params, icm, seed, args.final) for icm in VARIANTS.values() for seed in args.seeds]
    rows = run_all(run_one, jobs, args.jobs, args.out)
    report(rows, args, non_numeric=("collapsed_deterministic",))
    record_trials(rows, args, "ab_sac_icm", spec, configurations)
    if args.final:
        record_trials(rows, args, "ab_sac_icm", spec, configurations, split="test", repeat=repeat)


if __name__ == "__main__":
    main()
