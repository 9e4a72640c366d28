"""Walk-forward validation: rolling train/test windows, retrained or fine-tuned agents, several seeds.

The windows, their env specs and the summaries are ``evaluation.validation.folds``; this package trains the
agents and scores them: ``params`` (the ``walk_forward`` section and the ``WalkForwardJob`` one
execution shares), ``trainers`` (the ``Agent`` protocol and ``AGENT_TRAINERS``), ``chains`` (the retrain
task and the one chain loop of every engine), ``execution`` (folds, chains on the executor, scoring),
``ledger`` (trial-ledger rows), and the phase as its pipeline wires it: ``run`` (the run, its ledger
rows, its summary) and ``report`` (plots, tearsheet sections).

A backtest on one split tells little: one period, one seed, and every choice made while looking at
it. Walk-forward slides a training window and the test window after it through the history, trains
an agent per window (from scratch every ``retrain_frequency`` windows, fine-tuned from the previous
window's agent in between), and only ever scores an agent on bars after everything it learned from.

Leakage guards, each of which a test checks:

- ``gap_bars`` bars (purge + embargo) separate a training window from its test window; they must be
  at least the longest feature look-back, so no test-window feature reaches back into training bars
  (features are causal, so no training feature reaches forward either). The config is rejected,
  naming the key, when the gap is smaller.
- Features are recomputed per fold with every fitted statistic (GARCH parameters, the scaler) fitted
  on that fold's training window only.
- The training env holds the training window (plus ``window_size - 1`` context bars before it); the
  test env the test window (plus context bars, which lie in the gap). Test bars are never stepped on
  during training.

Windows are anchored at the last usable bar (``data_end``): by default the validation split's last
bar, so the walk-forward never sees the test split; the last test window ends there and earlier ones
step back by ``step`` bars. ``data_end: all`` makes a rerun after new data validate the most recent
period.
"""

from trading_rl.phases.walk_forward.chains import (
    ChainResult,
    RetrainTask,
    TrainedChain,
    chain_histories,
    run_retrain_group,
)
from trading_rl.phases.walk_forward.execution import (
    WalkForwardResult,
    folds_of,
    merge_seed_runs,
    prepare_fold,
    run_walk_forward,
    run_walk_forward_variants,
)
from trading_rl.phases.walk_forward.ledger import agent_seed, trial_configuration, trial_rows
from trading_rl.phases.walk_forward.params import WalkForwardJob, WalkForwardParams
from trading_rl.phases.walk_forward.trainers import (
    AGENT_TRAINERS,
    Agent,
    PolicyAgent,
    SB3Agent,
    agent_section,
    identity_params,
    train_sac,
)

__all__ = [
    "AGENT_TRAINERS",
    "Agent",
    "ChainResult",
    "PolicyAgent",
    "RetrainTask",
    "SB3Agent",
    "TrainedChain",
    "WalkForwardJob",
    "WalkForwardParams",
    "WalkForwardResult",
    "agent_section",
    "agent_seed",
    "chain_histories",
    "folds_of",
    "identity_params",
    "merge_seed_runs",
    "prepare_fold",
    "run_retrain_group",
    "run_walk_forward",
    "run_walk_forward_variants",
    "train_sac",
    "trial_configuration",
    "trial_rows",
]
