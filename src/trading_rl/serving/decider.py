"""The served model's decisions: a request checked, the ``SignalEngine`` decision, the safeguards'
verdict, the response, the alerts of the decision (``serving.alerts``, sent off the response path),
one decision-log line.

**State across requests** lives in the process (one ``Decider`` per loaded model, so one per server
worker: serve with one worker): the latest bar decided so far, the safeguards' day, trade count
and equity peak, and what the alert rules track of the account (``AccountTrack``). A request whose
latest bar is older than that bar is refused (``bars.timestamp``). A request for the same latest bar
(a retry) is decided again from the state before that bar's first decision, so a retry does not
count a trade twice. Decisions run one at a time (a lock): the scoring server calls ``predict`` from
several threads.

A refused request changes no state; it leaves one ``refused`` line in the decision log (field and
reason, nothing of the request) and nothing anywhere else.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from trading_rl.export.inference import Signal, SignalEngine
from trading_rl.export.safeguards import Safeguards
from trading_rl.monitoring.alerting import Alert
from trading_rl.serving.alerts import AccountTrack, AlertQueue, decision_alerts
from trading_rl.serving.decision_log import DecisionLog
from trading_rl.serving.package import read_serving_config, request_limits
from trading_rl.serving.request import DecisionRequest, RequestError, parse_request

# The order a trade is sent as, by the env's fill rule (``EnvConfig.fill``).
ORDER_TYPES = {"next_open": "market_on_open", "close": "market_on_close"}
# ``safeguard.verdict``: the policy's trade passed every rule, was blocked by one, or there was no trade.
PASSED, BLOCKED, NO_TRADE = "passed", "blocked", "no trade"


@dataclass(frozen=True)
class AccountState:
    """The state a decision changes: the safeguards' and the alert rules' view of the account."""

    safeguards: Safeguards
    track: AccountTrack


class Decider:
    """Decisions of one exported actor (``onnx``) under its serving config (``serving.package``),
    logged to ``log``; their alerts put on ``alerts`` (``None``: judged and logged, sent nowhere)."""

    def __init__(
        self,
        onnx: bytes,
        config: Mapping[str, Any],
        log: DecisionLog,
        alerts: AlertQueue | None = None,
        intra_op_threads: int = 1,
    ):
        stored = read_serving_config(config)
        self.config = dict(config)
        self.symbol = str(config["symbol"])
        self.model_version = str(config["model_version"])
        self.feature_params_digest = str(config["feature_params_digest"])
        self.order_type = ORDER_TYPES[stored.env_config.fill]
        self.engine = SignalEngine(
            onnx,
            stored.feature_params,
            config["scaler"],
            stored.env_config,
            list(config["feature_columns"]),
            intra_op_threads=intra_op_threads,
        )
        self.limits = request_limits(config)
        self.alerting = stored.alerting
        self.hold_threshold = stored.env_config.hold_threshold
        self.state = AccountState(Safeguards(stored.safeguards), AccountTrack())
        self.log = log
        self.alerts = alerts
        self._lock = threading.Lock()
        self._last_bar: pd.Timestamp | None = None
        self._before_last_bar: AccountState | None = None  # the state before the last bar's first decision
        self._decisions = 0

    @property
    def safeguards(self) -> Safeguards:
        return self.state.safeguards

    @property
    def last_bar(self) -> pd.Timestamp | None:
        """The latest bar decided so far (``None`` before the first decision)."""
        return self._last_bar

    def decide(self, raw: Any) -> dict[str, Any]:
        """The response to one request (plain JSON); ``RequestError`` naming the field when it is
        refused."""
        with self._lock:
            started = time.perf_counter()
            try:
                request = parse_request(raw, self.limits)
                response, alerts = self._decide(request)
            except RequestError as error:
                self._log_refusal(error)
                raise
            if self.alerts is not None:
                self.alerts.put(alerts)
            self._decisions += 1
            self.log.write(
                {
                    "logged_at": datetime.now(UTC).isoformat(),
                    "status": "decided",
                    "decision": self._decisions,
                    "latency_ms": (time.perf_counter() - started) * 1e3,
                    "bars": {
                        "n": len(request.index),
                        "first": request.index[0].isoformat(),
                        "last": request.index[-1].isoformat(),
                    },
                    "portfolio": asdict(request.portfolio),
                    "reference_price": request.reference_price,
                    **response,
                    "alerts": [{"rule": alert.rule, "level": alert.level.label} for alert in alerts],
                }
            )
            return response

    def refuse(self, error: RequestError) -> None:
        """Log a request refused before it reached :meth:`decide` (the batch around it was wrong)."""
        with self._lock:
            self._log_refusal(error)

    def _log_refusal(self, error: RequestError) -> None:
        self.log.write(
            {
                "logged_at": datetime.now(UTC).isoformat(),
                "status": "refused",
                "field": error.field,
                "reason": error.reason,
                "model_version": self.model_version,
            }
        )

    def _decide(self, request: DecisionRequest) -> tuple[dict[str, Any], list[Alert]]:
        latest = request.index[-1]
        if self._last_bar is not None and latest < self._last_bar:
            raise RequestError(
                "bars.timestamp",
                f"the latest bar {latest.isoformat()} is older than the latest bar already decided "
                f"({self._last_bar.isoformat()}); this server decides bars in time order",
            )
        try:
            signal = self.engine.checked_signal(
                request.index, request.ohlcv, request.portfolio, request.reference_price
            )
        except ValueError as error:  # features still in their warm-up on the bars given
            raise RequestError("bars", str(error)) from None
        if latest == self._last_bar and self._before_last_bar is not None:  # a retry of the latest bar
            before = self._before_last_bar
            safeguards = copy.copy(before.safeguards)
        else:
            before = AccountState(copy.copy(self.state.safeguards), self.state.track)
            safeguards = self.state.safeguards
        checked, violation = safeguards.verdict(signal, request.portfolio)
        track = before.track.after(signal.equity, signal.raw_action, self.alerting.collapse.window)
        self.state, self._before_last_bar, self._last_bar = AccountState(safeguards, track), before, latest
        blocked = None
        if violation is not None:
            rule, reason = violation
            blocked = {"timestamp": latest, "rule": rule, "reason": reason, "kind": signal.kind, "units": signal.units}
        alerts = decision_alerts(
            before.track,
            track,
            blocked,
            self.alerting,
            self.hold_threshold,
            timestamp=latest,
            context={"model_version": self.model_version, "symbol": self.symbol},
        )
        return self._response(request, signal, checked, violation), alerts

    def _response(
        self, request: DecisionRequest, signal: Signal, checked: Signal, violation: tuple[str, str] | None
    ) -> dict[str, Any]:
        units = checked.units
        return {
            "timestamp": request.index[-1].isoformat(),
            "symbol": self.symbol,
            "target_position": request.portfolio.position + units,
            "signal": {
                "action": "HOLD" if units == 0.0 else checked.kind.upper(),
                "units": abs(units),
                "order_type": None if units == 0.0 else self.order_type,
                "reference_price": checked.reference_price,
                "fill_price": checked.fill_price,
                "value": checked.value,
                "fee": checked.fee,
            },
            "policy": {
                "kind": signal.kind,
                "units": signal.units,
                "fill_price": signal.fill_price,
                "value": signal.value,
                "fee": signal.fee,
                "skipped": signal.skipped,
            },
            "raw_action": signal.raw_action,
            "smoothed_action": signal.smoothed_action,
            "confidence": abs(signal.raw_action),
            "safeguard": {
                "verdict": NO_TRADE if not signal.trades else BLOCKED if violation else PASSED,
                "rule": violation[0] if violation else None,
                "reason": violation[1] if violation else None,
            },
            "equity": signal.equity,
            "model_version": self.model_version,
            "feature_params_digest": self.feature_params_digest,
        }
