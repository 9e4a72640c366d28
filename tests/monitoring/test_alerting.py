"""Alerting: each rule at its thresholds, the levels, the cooldown (its state read back from the
JSON-lines file), the append-only JSON-lines channel, the webhook against a local HTTP server, and
channels isolated from one another."""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

from trading_rl.config import ConfigError
from trading_rl.monitoring import alerting
from trading_rl.monitoring.alerting import (
    ActionPsiThresholds,
    Alert,
    AlertFileError,
    AlertingParams,
    CollapseAlertParams,
    Cooldown,
    DailyLossThresholds,
    DecayAlertParams,
    DominanceThresholds,
    DrawdownThresholds,
    DriftAlertParams,
    DriftedFeatureThresholds,
    EntropyThresholds,
    JsonLinesChannel,
    Level,
    LogChannel,
    SafeguardAlertParams,
    WebhookChannel,
    configured_channels,
    dispatch,
)
from trading_rl.monitoring.collapse import action_stats

WHEN = {"timestamp": "2026-02-02T00:00:00", "bar": 10}


def levels(alerts: list[Alert]) -> list[str]:
    return [alert.level.label for alert in alerts]


def an_alert(
    rule: str = "drawdown", level: Level = Level.CRITICAL, bar: int = 10, timestamp: str = "2026-02-02"
) -> Alert:
    return Alert(rule, level, "planted", 0.3, 0.2, timestamp, {"symbol": "X"}, bar)


# --- levels ------------------------------------------------------------------------------------


def test_levels_are_ordered_and_read_from_their_names():
    assert Level.INFO < Level.WARNING < Level.CRITICAL
    assert [Level.of(name) for name in ("info", "warning", "critical")] == list(Level)
    assert alerting.LEVELS == ("info", "warning", "critical")
    with pytest.raises(ValueError, match="unknown alert level 'severe'"):
        Level.of("severe")


def test_an_info_threshold_gives_an_info_alert():
    thresholds = DrawdownThresholds(info=0.125, warning=0.25, critical=0.5)
    assert levels(alerting.drawdown([1.0, 0.875], thresholds, **WHEN)) == ["info"]
    assert levels(alerting.drawdown([1.0, 0.75], thresholds, **WHEN)) == ["warning"]


def test_thresholds_must_rise_with_the_level_and_name_the_keys():
    with pytest.raises(
        ConfigError, match=r"'alerting.drawdown.warning' \(0.3\) must be <= 'alerting.drawdown.critical'"
    ):
        AlertingParams.from_mapping({"drawdown": {"warning": 0.3, "critical": 0.2}}, "alerting")
    with pytest.raises(ConfigError, match=r"'alerting.collapse.entropy.warning' \(0.1\) must be >="):
        AlertingParams.from_mapping({"collapse": {"entropy": {"warning": 0.1, "critical": 0.3}}}, "alerting")
    with pytest.raises(ConfigError, match="alerting.cooldown"):
        AlertingParams.from_mapping({"cooldown": {"bars": 3, "seconds": 60}}, "alerting")
    with pytest.raises(ConfigError, match="alerting.channels.webhook.url"):
        AlertingParams.from_mapping({"channels": {"webhook": {"url": "localhost:9"}}}, "alerting")
    with pytest.raises(ConfigError, match="alerting.decay.critical_checks"):
        AlertingParams.from_mapping({"decay": {"critical_checks": ["sharpe"]}}, "alerting")
    with pytest.raises(ConfigError, match=r"did you mean 'alerting.daily_loss'"):
        AlertingParams.from_mapping({"daily_los": {}}, "alerting")


def test_the_defaults_send_nothing_over_the_network():
    params = AlertingParams()
    assert params.channels.webhook.url is None and params.channels.log
    assert params.channels.jsonl == "data/08_reporting/alerts/alerts.jsonl"


# --- rules at their thresholds: just under / at / over ------------------------------------------

UNDER = 1e-9


@pytest.mark.parametrize(
    "last, expected",
    [
        (0.75 + UNDER, []),
        (0.75, ["warning"]),
        (0.7, ["warning"]),
        (0.5 + UNDER, ["warning"]),
        (0.5, ["critical"]),
        (0.1, ["critical"]),
    ],
)
def test_drawdown_at_its_thresholds(last, expected):
    thresholds = DrawdownThresholds(warning=0.25, critical=0.5)
    # peak-to-trough: the peak in the middle, a partial recovery at the end does not hide the trough
    assert levels(alerting.drawdown([0.8, 1.0, last, last + 0.05], thresholds, **WHEN)) == expected


def test_a_drawdown_alert_carries_value_threshold_time_and_context():
    (alert,) = alerting.drawdown(
        [1.0, 0.7], DrawdownThresholds(), timestamp="2026-02-02T00:00:00", bar=7, context={"symbol": "X"}
    )
    assert (alert.rule, alert.level, alert.bar, alert.context) == ("drawdown", Level.CRITICAL, 7, {"symbol": "X"})
    assert alert.value == pytest.approx(0.3) and alert.threshold == 0.2 and alert.timestamp == "2026-02-02T00:00:00"
    assert alerting.drawdown([1.0, 1.1, 1.2], DrawdownThresholds(), **WHEN) == []


@pytest.mark.parametrize(
    "last, expected",
    [
        (-0.125 + UNDER, []),
        (-0.125, ["warning"]),
        (-0.2, ["warning"]),
        (-0.25 + UNDER, ["warning"]),
        (-0.25, ["critical"]),
        (-0.5, ["critical"]),
    ],
)
def test_daily_loss_at_its_thresholds(last, expected):
    thresholds = DailyLossThresholds(warning=0.125, critical=0.25)
    # only the last bar counts: an earlier, larger loss does not alert again
    assert levels(alerting.daily_loss([-0.9, 0.01, last], thresholds, **WHEN)) == expected


def _decisions(n_hold: int, n: int = 20) -> np.ndarray:
    """``n_hold`` holds (0.0) then strong buys (0.9): dominance ``n_hold / n`` when more than half."""
    return np.r_[np.zeros(n_hold), np.full(n - n_hold, 0.9)]


@pytest.mark.parametrize(
    "n_hold, expected", [(15, []), (16, ["warning"]), (17, ["warning"]), (19, ["critical"]), (20, ["critical"])]
)
def test_collapse_dominance_at_its_thresholds(n_hold, expected):
    config = CollapseAlertParams(
        window=20,
        min_decisions=20,
        dominance=DominanceThresholds(warning=0.8, critical=0.95),
        entropy=EntropyThresholds(warning=None, critical=None),
    )
    found = alerting.collapse(_decisions(n_hold), config, hold_threshold=0.1, **WHEN)
    assert levels(found) == expected
    if found:
        assert found[0].value == n_hold / 20 and found[0].context["statistic"] == "dominance"


@pytest.mark.parametrize("offset, expected", [(-UNDER, []), (0.0, ["warning"]), (0.05, ["warning"])])
def test_collapse_entropy_at_its_thresholds(offset, expected):
    actions = _decisions(14)
    entropy = action_stats(actions, hold_threshold=0.1)["entropy"]
    config = CollapseAlertParams(
        window=20,
        min_decisions=20,
        dominance=DominanceThresholds(warning=None, critical=None),
        entropy=EntropyThresholds(warning=entropy + offset, critical=entropy / 2),
    )
    assert levels(alerting.collapse(actions, config, hold_threshold=0.1, **WHEN)) == expected


def test_collapse_judges_only_the_last_decisions_and_enough_of_them():
    config = CollapseAlertParams(window=20, min_decisions=10)
    collapsed_then_varied = np.r_[np.zeros(100), np.random.default_rng(0).uniform(-1, 1, 20)]
    assert alerting.collapse(collapsed_then_varied, config, hold_threshold=0.1, **WHEN) == []
    assert levels(alerting.collapse(np.zeros(10), config, hold_threshold=0.1, **WHEN)) == ["critical"]
    assert alerting.collapse(np.zeros(9), config, hold_threshold=0.1, **WHEN) == []
    # both statistics fire: one alert, at the higher level, naming both
    (alert,) = alerting.collapse(np.zeros(20), config, hold_threshold=0.1, **WHEN)
    assert alert.context["dominance"] == 1.0 and alert.context["entropy"] == 0.0


@pytest.mark.parametrize(
    "drifted, psi, expected",
    [
        ([], 0.25 - UNDER, []),
        (["a"], 0.25, ["feature_drift:warning", "action_drift:warning"]),
        (["a", "b"], 0.3, ["feature_drift:warning", "action_drift:warning"]),
        (["a", "b", "c"], 0.5 - UNDER, ["feature_drift:critical", "action_drift:warning"]),
        ([], 0.5, ["action_drift:critical"]),
        ([], None, []),
    ],
)
def test_drift_at_its_thresholds(drifted, psi, expected):
    config = DriftAlertParams(
        features=DriftedFeatureThresholds(warning=1, critical=3),
        action_psi=ActionPsiThresholds(warning=0.25, critical=0.5),
    )
    report = {"drifted_features": drifted, "actions": {"psi": psi, "drifted": bool(psi and psi > 0.25)}}
    found = alerting.drift(report, config, **WHEN)
    assert [f"{alert.rule}:{alert.level.label}" for alert in found] == expected


CHECKS = [
    {"check": "sharpe_range", "value": -2.0, "expected": "[0.2, 1.5]", "status": "alert"},
    {"check": "psr", "value": 0.01, "expected": ">= 0.05", "status": "ok"},
    {"check": "drawdown", "value": 0.1, "expected": "<= 0.12", "status": "pending"},
]


def test_decay_names_the_failing_checks_at_its_level_or_critical():
    (alert,) = alerting.decay({"checks": CHECKS}, DecayAlertParams(), **WHEN)
    assert (alert.rule, alert.level, alert.value, alert.context["checks"]) == (
        "decay",
        Level.WARNING,
        1.0,
        ["sharpe_range"],
    )
    failing_psr = [{**check, "status": "alert"} if check["check"] == "psr" else check for check in CHECKS]
    (alert,) = alerting.decay({"checks": failing_psr}, DecayAlertParams(), **WHEN)
    assert alert.level == Level.CRITICAL and alert.context["critical_checks"] == ["psr"] and alert.value == 2.0
    assert levels(alerting.decay({"checks": CHECKS}, DecayAlertParams(level="info"), **WHEN)) == ["info"]
    assert alerting.decay({"checks": [{**CHECKS[0], "status": "pending"}]}, DecayAlertParams(), **WHEN) == []
    assert alerting.decay({"status": "not checked", "checks": []}, DecayAlertParams(), **WHEN) == []


def test_a_safeguard_block_alerts_and_a_passed_trade_does_not():
    blocked = {
        "timestamp": "2026-02-02T15:00:00",
        "rule": "max_drawdown",
        "reason": "drawdown 0.3 >= 0.2",
        "kind": "buy",
        "units": 5.0,
    }
    (alert,) = alerting.safeguard_block(blocked, SafeguardAlertParams(level="critical"), bar=3)
    assert (alert.rule, alert.level, alert.context["safeguard"], alert.timestamp) == (
        "safeguard_block",
        Level.CRITICAL,
        "max_drawdown",
        "2026-02-02T15:00:00",
    )
    assert alerting.safeguard_block({**blocked, "rule": None}, SafeguardAlertParams()) == []


# --- cooldown ----------------------------------------------------------------------------------


def test_the_cooldown_in_bars_suppresses_inside_and_sends_after(tmp_path):
    path = tmp_path / "alerts.jsonl"
    cooldown = Cooldown(bars=5)
    first = dispatch([an_alert(bar=10)], [JsonLinesChannel(path)], cooldown)
    inside = dispatch([an_alert(bar=14)], [JsonLinesChannel(path)], cooldown)
    other_level = dispatch([an_alert(level=Level.WARNING, bar=14)], [JsonLinesChannel(path)], cooldown)
    after = dispatch([an_alert(bar=15)], [JsonLinesChannel(path)], cooldown)
    assert [len(first.sent), len(inside.sent), len(other_level.sent), len(after.sent)] == [1, 0, 1, 1]
    assert [alert.bar for alert in inside.suppressed] == [14]
    assert [json.loads(line)["bar"] for line in path.read_text().splitlines()] == [10, 14, 15]


def test_the_cooldown_state_is_read_back_from_the_file_after_a_restart(tmp_path):
    path = tmp_path / "alerts.jsonl"
    dispatch([an_alert(bar=10)], [JsonLinesChannel(path)], Cooldown(bars=5))
    # a new process: its cooldown knows only what the file says
    restarted = Cooldown(bars=5, history=JsonLinesChannel(path).read())
    assert dispatch([an_alert(bar=12)], [JsonLinesChannel(path)], restarted).suppressed
    assert dispatch([an_alert(bar=12)], [JsonLinesChannel(path)], Cooldown(bars=5)).sent  # without the file: sent
    # through the configured channels, as the forward run does
    config = AlertingParams.from_mapping({"channels": {"jsonl": str(path), "log": False}}, "alerting")
    channels, cooldown = configured_channels(config)
    assert dispatch([an_alert(bar=13)], channels, cooldown).suppressed


def test_a_sources_cooldown_reads_back_its_own_alerts_only(tmp_path):
    """The forward reruns and the served model share the file, not their bar counts."""
    path = tmp_path / "alerts.jsonl"
    served = Alert("drawdown", Level.CRITICAL, "planted", 0.3, 0.2, "2026-02-02", {"source": "served"}, 10)
    dispatch([served], [JsonLinesChannel(path)])
    config = AlertingParams.from_mapping({"channels": {"jsonl": str(path), "log": False}}, "alerting")
    forward = Alert("drawdown", Level.CRITICAL, "planted", 0.3, 0.2, "2026-02-02", {"source": "forward"}, 12)
    assert configured_channels(config)[1].suppresses(forward)  # no source: every line counts
    channels, cooldown = configured_channels(config, source="forward")
    assert dispatch([forward], channels, cooldown).sent
    channels, cooldown = configured_channels(config, source="served")
    assert dispatch([served], channels, cooldown).suppressed


def test_the_cooldown_in_seconds_uses_the_alerts_timestamps(tmp_path):
    path = tmp_path / "alerts.jsonl"
    dispatch([an_alert(timestamp="2026-02-02T00:00:00")], [JsonLinesChannel(path)], Cooldown(seconds=3600))
    restarted = Cooldown(seconds=3600, history=JsonLinesChannel(path).read())
    assert dispatch([an_alert(timestamp="2026-02-02T00:59:59")], [], restarted).suppressed
    assert dispatch([an_alert(timestamp="2026-02-02T01:00:00")], [], restarted).sent
    # an alert older than the last one (a replay of earlier bars, a new record) is not suppressed
    assert dispatch([an_alert(timestamp="2026-02-01T00:00:00")], [], Cooldown(seconds=3600, history=[an_alert()])).sent
    with pytest.raises(ValueError, match="not both"):
        Cooldown(bars=1, seconds=1)


def test_without_a_cooldown_nothing_is_suppressed():
    outcome = dispatch([an_alert(), an_alert()], [], Cooldown())
    assert len(outcome.sent) == 2 and not outcome.suppressed


# --- the JSON-lines channel --------------------------------------------------------------------


def test_the_jsonl_channel_appends_one_line_per_alert_and_never_rewrites(tmp_path):
    path = tmp_path / "nested" / "alerts.jsonl"
    dispatch([an_alert(bar=1), an_alert(rule="daily_loss", bar=1)], [JsonLinesChannel(path)])
    before = path.read_bytes()
    dispatch([an_alert(bar=20)], [JsonLinesChannel(path)], Cooldown(bars=5, history=JsonLinesChannel(path).read()))
    after = path.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == 3
    lines = [json.loads(line) for line in after.splitlines()]
    assert lines[0] == an_alert(bar=1).to_dict() and Alert.from_dict(lines[2]) == an_alert(bar=20)
    assert lines[1]["rule"] == "daily_loss" and lines[2]["level"] == "critical"


@pytest.mark.parametrize(
    "content, line",
    [
        (b'{"rule": "drawdown", "level": "critical", "timestamp": "2026-02-02"}\nnot json\n', 2),
        (b'{"rule": "drawdown", "level": "critical", "timestamp": "2026-02-02"}', 1),  # no final newline
        (b"[1, 2]\n", 1),
        (b'{"rule": "drawdown", "level": "severe", "timestamp": "2026-02-02"}\n', 1),
        (b"\n", 1),
    ],
)
def test_the_jsonl_channel_refuses_a_file_that_is_not_json_lines_and_leaves_it(tmp_path, caplog, content, line):
    path = tmp_path / "alerts.jsonl"
    path.write_bytes(content)
    with pytest.raises(AlertFileError, match=rf"{re.escape(str(path))}: line {line} .*left unchanged"):
        JsonLinesChannel(path).read()
    delivered = []

    class Collect:
        name = "collect"

        def send(self, alert):
            delivered.append(alert)
            return True

    with caplog.at_level(logging.ERROR, logger="trading_rl.monitoring.alerting"):
        outcome = dispatch([an_alert()], [JsonLinesChannel(path), Collect()])
    assert path.read_bytes() == content and delivered == [an_alert()]
    assert outcome.failed == [("jsonl", an_alert())] and f"line {line}" in caplog.text
    # configured: the channel is left out (logged), the others and the cooldown still work
    config = AlertingParams.from_mapping({"channels": {"jsonl": str(path)}}, "alerting")
    with caplog.at_level(logging.ERROR, logger="trading_rl.monitoring.alerting"):
        channels, _ = configured_channels(config)
    assert [channel.name for channel in channels] == ["log"] and "jsonl left out" in caplog.text
    assert path.read_bytes() == content


# --- the webhook, against a local server -------------------------------------------------------


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.path, self.headers["Content-Type"], json.loads(body)))  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):  # keep the test output quiet
        pass


@pytest.fixture
def webhook_server(monkeypatch):
    """A local HTTP server on 127.0.0.1 (ephemeral port) in a thread, answering ``server.status``;
    what it received in ``server.received``. Shut down after the test, whatever happens."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    server.received = []  # type: ignore[attr-defined]
    server.status = 200  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_the_webhook_posts_each_alert_as_json(webhook_server):
    url = f"http://127.0.0.1:{webhook_server.server_port}/hooks/trading?token=secret"
    alerts = [an_alert(bar=1), an_alert(rule="collapse", level=Level.WARNING, bar=1)]
    outcome = dispatch(alerts, [WebhookChannel(url, timeout_s=2)])
    assert outcome.failed == [] and len(outcome.sent) == 2
    assert webhook_server.received == [
        ("/hooks/trading?token=secret", "application/json", alert.to_dict()) for alert in alerts
    ]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_failing_webhook_is_logged_not_raised_and_the_other_channels_deliver(webhook_server, tmp_path, caplog):
    webhook_server.status = 500
    path = tmp_path / "alerts.jsonl"
    broken = [
        WebhookChannel(f"http://127.0.0.1:{webhook_server.server_port}/hook?token=secret", timeout_s=2),
        WebhookChannel(f"http://127.0.0.1:{_closed_port()}/hook", timeout_s=2),
    ]
    with caplog.at_level(logging.INFO, logger="trading_rl.monitoring.alerting"):
        outcome = dispatch([an_alert()], [broken[0], LogChannel(), broken[1], JsonLinesChannel(path)])
    assert [name for name, _ in outcome.failed] == ["webhook", "webhook"] and outcome.sent == [an_alert()]
    assert len(webhook_server.received) == 1  # the server got it and answered 500
    assert len(path.read_text().splitlines()) == 1  # the file still got it
    errors = [record.getMessage() for record in caplog.records if record.levelno == logging.ERROR]
    assert len(errors) == 2 and "500" in errors[0] and "not delivered" in errors[1]
    assert all("secret" not in message for message in errors)  # the URL's token is not logged
    assert any(record.levelno == logging.CRITICAL and "planted" in record.getMessage() for record in caplog.records)


def test_a_channel_that_raises_does_not_stop_the_others(tmp_path, caplog):
    class Broken:
        name = "broken"

        def send(self, alert):
            raise RuntimeError("disk on fire")

    path = tmp_path / "alerts.jsonl"
    with caplog.at_level(logging.ERROR, logger="trading_rl.monitoring.alerting"):
        outcome = dispatch([an_alert(bar=1), an_alert(bar=9)], [Broken(), JsonLinesChannel(path)], Cooldown(bars=5))
    assert len(outcome.sent) == 2 and [name for name, _ in outcome.failed] == ["broken", "broken"]
    assert len(path.read_text().splitlines()) == 2 and "disk on fire" in caplog.text


def test_the_log_channel_logs_at_the_alerts_level(caplog):
    with caplog.at_level(logging.INFO, logger="trading_rl.monitoring.alerting"):
        for level in Level:
            LogChannel().send(an_alert(level=level))
    assert [record.levelno for record in caplog.records] == [logging.INFO, logging.WARNING, logging.CRITICAL]
