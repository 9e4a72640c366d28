"""A/B of the reward_shaper phase over seeds: shaped vs unshaped continuation of the same agent.

Both variants continue the latest ``sac_icm_model`` for the same ``training.continue_timesteps`` of the
chosen Kedro env's ``reward_shaper`` parameters: *shaped* collects rollouts, fits the weight network
and Φ and trains on ``ShapedRewardVecEnv``; *unshaped* trains on the env's own reward (same
``training.n_envs`` envs, curiosity mixing off in both, so only the reward differs).
Each is evaluated on the validation split next to the
baselines. Prints one row per variant × seed (action entropy, trade rate, validation Sharpe and max
drawdown), the medians per variant, writes everything as JSON to ``--out`` and appends one
trial-ledger row per variant (``--ledger``).

    python benchmarks/ab_reward_shaper.py [--env base] [--seeds 0 1 2] [--jobs 1] [--out ab_reward_shaper.json]
                                          [--ledger DIR | --no-ledger]

Needs a finished ``kedro run`` up to ``sac_icm`` (it reads the latest ``env_spec`` and ``sac_icm_model``),
or ``--inputs DIR`` written by ``--dump-inputs DIR``.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
import time
from functools import partial

from ab_common import load_inputs, parse_args, record_trials, report, run_all


def run_one(spec, source_bytes: bytes, params: dict, shaped: bool, seed: int) -> dict:
    import torch

    from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
    from trading_rl.evaluation.metrics.report import evaluate_policy
    from trading_rl.evaluation.metrics.rollout import policy_from_sb3
    from trading_rl.monitoring.collapse import CollapseThresholds
    from trading_rl.rewards.shaped_training import (
        PARAMS_PREFIX,
        RewardShaperParams,
        collect_rollouts,
        continue_agent,
        continue_training,
        fit_reward_models,
        training_vec_env,
    )

    torch.set_num_threads(1)
    source = SACWithICM.load(io.BytesIO(source_bytes), device="cpu")
    params = RewardShaperParams.from_mapping(params["reward_shaper"], PARAMS_PREFIX)
    started = time.perf_counter()
    gates_passed = None
    with tempfile.TemporaryDirectory() as work_dir:
        if shaped:
            rollouts = collect_rollouts(source, spec, params, seed)
            weights, potential, fit = fit_reward_models(rollouts, params, float(source.gamma), seed)
            gates_passed = fit["weight_gates_passed"]
            outcome, _, _ = continue_training(source, spec, weights, potential, params, seed, work_dir)
        else:
            outcome = continue_agent(source, spec, training_vec_env(spec, params, seed), params, seed, work_dir)
    evaluation, collapse = evaluate_policy(
        "shaped" if shaped else "unshaped",
        policy_from_sb3(outcome.model, deterministic=True),
        policy_from_sb3(outcome.model, deterministic=False),
        partial(spec.make_env, params.evaluation_split),
        spec.periods_per_year,
        seed=seed,
        thresholds=CollapseThresholds(),
    )
    metrics = evaluation["metrics"]
    return {
        "variant": "shaped" if shaped else "unshaped",
        "seed": seed,
        "split": params.evaluation_split,
        "action_entropy": metrics["action_entropy"],
        "trade_rate": metrics["n_trades"] / metrics["n_steps"],
        "val_sharpe": metrics["sharpe"],
        "val_max_drawdown": metrics["max_drawdown"],
        "val_total_return": metrics["total_return"],
        "stochastic_entropy": evaluation["stochastic_metrics"]["action_entropy"],
        "collapsed_deterministic": collapse["deterministic"]["collapsed"],
        "weight_gates_passed": gates_passed,
        "train_seconds": time.perf_counter() - started,
        "return_moments": evaluation["return_moments"],
        "baselines": evaluation["baselines"],
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], "ab_reward_shaper.json")
    spec, params, source = load_inputs(args)
    jobs = [(spec, source, params, shaped, seed) for shaped in (False, True) for seed in args.seeds]
    rows = run_all(run_one, jobs, args.jobs, args.out)
    report(rows, args, non_numeric=("collapsed_deterministic", "weight_gates_passed"))
    source_model = hashlib.sha256(source).hexdigest()[:16]
    configurations = {
        variant: {"shaped": shaped, "reward_shaper": params["reward_shaper"], "source_model": source_model}
        for variant, shaped in (("unshaped", False), ("shaped", True))
    }
    record_trials(rows, args, "ab_reward_shaper", spec, configurations)


if __name__ == "__main__":
    main()
