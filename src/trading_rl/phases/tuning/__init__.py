"""Hyper-parameter tuning of the walk-forward's SAC+ICM agent, with every trial on the ledger.

Optuna samples agent parameters from ``tuning.search_space``; each sample (a trial) is scored by a
walk-forward whose windows end at the training split's last bar, so the choice sees neither the
validation split (what the default run's walk-forward and gates report on) nor the test split
(spent once by ``final_evaluation``). The score is the median out-of-sample Sharpe over the
trial's windows × seeds × symbols. Trials are asked ``tuning.trials_per_population`` at a time and
their walk-forwards run as one execution (on the population engine, their agents are members of
the same populations).

With ``tuning.pruning`` on, each trial first trains its first ``rung_seeds`` seeds; Optuna's
median rule stops (prunes) the trials whose objective there is below the median of the completed
trials', and only the others train their remaining seeds.

Tuning is selection, and selection inflates the best Sharpe: every trial, a failed or pruned one
included, becomes a row of the trial ledger (``evaluation.ledger.ledger``), so the Deflated Sharpe of the
chosen configuration, and of anything evaluated after it, counts all of them.

The chosen values are written as a parameters mapping (``sac_icm.agent`` and
``walk_forward.agent_overrides``) that a run takes with ``--params`` (:func:`params_argument`) or
as a parameters file in a config env.

The package: ``params`` (the ``tuning`` section, its checks against the trials' protocol, the chosen
values as parameters), ``trials`` (the study's sampler and storage, a trial's values and objective, a
population of trials evaluated as one walk-forward execution), ``run`` (``run_tuning`` and the
``tune`` node's function) and ``report`` (the tuning report and its MLflow metrics).
"""

from trading_rl.phases.tuning.params import (
    AGENT,
    DATA_END,
    FIXED_PROTOCOL,
    OBJECTIVE,
    TUNING_LEDGER_SOURCE,
    PruningParams,
    SearchDimension,
    TuningParams,
    check_pruning,
    check_search_space,
    merge_sections,
    nested,
    params_argument,
    trial_protocol,
    tuned_parameters,
)
from trading_rl.phases.tuning.report import report_tuning, tuning_metrics, tuning_report
from trading_rl.phases.tuning.run import TuningResult, failed_trial_rows, run_tuning, tune
from trading_rl.phases.tuning.trials import (
    PendingTrial,
    TrialEvaluator,
    TrialOutcome,
    make_sampler,
    objective_value,
    study_storage,
    suggest,
)

__all__ = [
    "AGENT",
    "DATA_END",
    "FIXED_PROTOCOL",
    "OBJECTIVE",
    "TUNING_LEDGER_SOURCE",
    "PendingTrial",
    "PruningParams",
    "SearchDimension",
    "TrialEvaluator",
    "TrialOutcome",
    "TuningParams",
    "TuningResult",
    "check_pruning",
    "check_search_space",
    "failed_trial_rows",
    "make_sampler",
    "merge_sections",
    "nested",
    "objective_value",
    "params_argument",
    "report_tuning",
    "run_tuning",
    "study_storage",
    "suggest",
    "trial_protocol",
    "tune",
    "tuned_parameters",
    "tuning_metrics",
    "tuning_report",
]
