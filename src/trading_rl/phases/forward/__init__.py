"""The deployed agent's forward track record: bars that arrived after it was trained.

A scheduled rerun on a longer price file rebuilds the features with the model's own (frozen)
feature parameters and scaler, both read from its metadata (``deployment_metadata``), runs the
agent deterministically over every bar after its data end, and appends the bars the previous record
did not have.

**Continuity.** Each rerun replays the agent from the deployment start instead of restoring a saved
env state: the evaluation env, the features and the policy are deterministic, so the replay of the
old bars must reproduce the stored record bit for bit, which ``extend_record`` checks before
appending (a revised price, a changed feature or env code, another model: refused, naming the first
differing bar). The stitched record therefore *is* one evaluation over the same bars; no portfolio,
smoothing or position-age state has to be serialised next to the env that owns it. The replay costs
one pass over the forward bars per rerun (three years of daily bars: well under a second).

The package: ``params`` (the ``forward`` section), ``data`` (the deployed model's forward data, or
``NotDeployed``, and ``unless_deployed``, the one place the nodes tell the two apart), ``record``
(replay, the record checked and extended), ``report`` (metrics, drift, tearsheet), ``decay``
(the alerts against the walk-forward, and this rerun's MLflow metrics) and ``alerts`` (the rerun's
checks, drawdown, losses, collapse and drift sent as ``monitoring.alerting`` alerts).
"""

from trading_rl.phases.forward.alerts import forward_rule_alerts, send_forward_alerts
from trading_rl.phases.forward.data import (
    FORWARD_SPLIT,
    ForwardData,
    NotDeployed,
    forward_data,
    prepare_forward_data,
    unless_deployed,
)
from trading_rl.phases.forward.decay import check_forward_decay, decay_alerts, forward_metrics, psr_against
from trading_rl.phases.forward.params import DecayParams, DriftParams, ForwardParams
from trading_rl.phases.forward.record import (
    RECORD_COLUMNS,
    SCORED_COLUMNS,
    ForwardRecordError,
    check_record,
    empty_record,
    extend_record,
    record_way_back,
    replay,
    score_forward_bars,
)
from trading_rl.phases.forward.report import (
    forward_drift,
    forward_report,
    forward_tearsheet,
    measure_forward_drift,
    report_forward,
)

__all__ = [
    "FORWARD_SPLIT",
    "RECORD_COLUMNS",
    "SCORED_COLUMNS",
    "DecayParams",
    "DriftParams",
    "ForwardData",
    "ForwardParams",
    "ForwardRecordError",
    "NotDeployed",
    "check_forward_decay",
    "check_record",
    "decay_alerts",
    "empty_record",
    "extend_record",
    "forward_data",
    "forward_drift",
    "forward_metrics",
    "forward_report",
    "forward_rule_alerts",
    "forward_tearsheet",
    "measure_forward_drift",
    "prepare_forward_data",
    "psr_against",
    "record_way_back",
    "replay",
    "report_forward",
    "score_forward_bars",
    "send_forward_alerts",
    "unless_deployed",
]
