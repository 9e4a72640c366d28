"""The served model's alerts: a blocked trade and the served account's drawdown go through the
``monitoring.alerting`` rules, cooldown and channels; the channels run off the response path; the
channels are resolved from the model's stored section and the server's environment."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest
from helpers.served_model import BUYER, buying_bars, request_for

from trading_rl.config import ConfigError
from trading_rl.monitoring.alerting import AlertingParams, Cooldown, JsonLinesChannel, LogChannel, WebhookChannel
from trading_rl.serving import ALERT_WEBHOOK_ENV, ALERTS_FILE_ENV, AlertQueue, Decider, DecisionLog
from trading_rl.serving.package import read_serving_config

FLUSH_S = 10.0
NO_SAFEGUARDS = dict.fromkeys(
    ("max_trades_per_day", "max_position_pct", "daily_loss_limit", "max_drawdown", "min_confidence")
)


def _decider(setup, tmp_path, channels, safeguards=None) -> Decider:
    config = dict(setup.package.config)
    if safeguards is not None:
        config["safeguards"] = safeguards
    queue = AlertQueue(channels, Cooldown(bars=5))
    return Decider(setup.package.onnx, config, DecisionLog(tmp_path / "decisions.jsonl"), queue)


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_blocked_trade_is_a_safeguard_block_alert_once_inside_the_cooldown(serving_setup, tmp_path):
    alerts = tmp_path / "alerts.jsonl"
    decider = _decider(serving_setup, tmp_path, [JsonLinesChannel(alerts)], {"max_trades_per_day": 1})
    bars = buying_bars(serving_setup, decider)
    decider.decide(request_for(bars, BUYER))
    later = bars.copy()  # the same day an hour later: the day's one trade is spent
    later.index = later.index[:-1].append(later.index[-1:] + pd.Timedelta(hours=1))
    response = decider.decide(request_for(later, BUYER))
    assert response["safeguard"]["verdict"] == "blocked"
    assert decider.decide(request_for(later, BUYER)) == response  # a retry: same bar, same alert, suppressed
    assert decider.alerts.flush(FLUSH_S)
    (alert,) = _lines(alerts)
    assert (alert["rule"], alert["level"], alert["bar"]) == ("safeguard_block", "warning", 2)
    assert alert["timestamp"] == later.index[-1].isoformat() and "max_trades_per_day" in alert["message"]
    assert alert["context"]["source"] == "served" and alert["context"]["safeguard"] == "max_trades_per_day"
    assert alert["context"]["model_version"] == serving_setup.package.model_version
    blocked = [{"rule": "safeguard_block", "level": "warning"}]
    assert [line["alerts"] for line in _lines(tmp_path / "decisions.jsonl")] == [[], blocked, blocked]


def test_the_served_accounts_drawdown_alerts_once_per_level_inside_the_cooldown(serving_setup, tmp_path):
    """A flat account whose cash falls 2.2 % a bar: no bar's loss reaches ``daily_loss``; the drawdown
    from the peak reaches the warning threshold (10 %) at the 6th decision and again 5 bars later,
    the critical one (20 %) at the 12th; the 13th, still critical, is inside the cooldown."""
    alerts = tmp_path / "alerts.jsonl"
    decider = _decider(serving_setup, tmp_path, [JsonLinesChannel(alerts)], NO_SAFEGUARDS)
    prices = serving_setup.prices
    for k in range(13):
        decider.decide(request_for(prices.iloc[: len(prices) - 13 + k + 1], {"cash": 100_000.0 * 0.978**k}))
    assert decider.alerts.flush(FLUSH_S)
    drawdowns = [(line["level"], line["bar"]) for line in _lines(alerts) if line["rule"] == "drawdown"]
    assert drawdowns == [("warning", 6), ("warning", 11), ("critical", 12)]
    assert not [line for line in _lines(alerts) if line["rule"] == "daily_loss"]
    logged = [line["alerts"] for line in _lines(tmp_path / "decisions.jsonl")]
    assert logged[12] == [{"rule": "drawdown", "level": "critical"}]  # judged; the cooldown kept it off the channels


class _Slow:
    """A channel that takes ``delay`` seconds per alert (a webhook at its timeout)."""

    name = "slow"

    def __init__(self, delay: float):
        self.delay, self.sent = delay, []

    def send(self, alert) -> bool:
        time.sleep(self.delay)
        self.sent.append(alert)
        return True


def test_a_slow_channel_does_not_hold_the_response(serving_setup, tmp_path):
    slow = _Slow(delay=2.0)
    decider = _decider(serving_setup, tmp_path, [slow], {"max_trades_per_day": 1})
    bars = buying_bars(serving_setup, decider)
    decider.decide(request_for(bars, BUYER))
    later = bars.copy()
    later.index = later.index[:-1].append(later.index[-1:] + pd.Timedelta(hours=1))
    started = time.perf_counter()
    response = decider.decide(request_for(later, BUYER))
    took = time.perf_counter() - started
    assert response["safeguard"]["verdict"] == "blocked" and slow.sent == []
    assert took < 1.0, took  # the 2-second channel runs on the queue's thread
    assert decider.alerts.flush(FLUSH_S) and [alert.rule for alert in slow.sent] == ["safeguard_block"]


def test_a_failing_dispatch_is_logged_and_the_queue_goes_on(caplog):
    from trading_rl.monitoring.alerting import Alert, Level

    class BrokenOnce(Cooldown):
        broken = True

        def suppresses(self, alert) -> bool:
            if self.broken:
                self.broken = False
                raise RuntimeError("cooldown broken")
            return super().suppresses(alert)

    collected = _Slow(delay=0.0)
    queue = AlertQueue([collected], BrokenOnce())
    alert = Alert("drawdown", Level.CRITICAL, "planted", 0.3, 0.2, "2026-01-02T00:00:00", bar=1)
    queue.put([alert])
    queue.put([alert])
    assert queue.flush(FLUSH_S) and collected.sent == [alert] and "cooldown broken" in caplog.text


def test_the_channels_come_from_the_stored_section_and_the_servers_environment(serving_setup, tmp_path, monkeypatch):
    from trading_rl.serving.alerts import packaged_alerting, served_alert_queue

    monkeypatch.chdir(tmp_path)
    section = AlertingParams.from_mapping(
        {"channels": {"webhook": {"url": "https://hooks.example.com/token"}}, "cooldown": {"bars": 3}}, "alerting"
    )
    config = {**serving_setup.package.config, "alerting": packaged_alerting(section)}
    stored = read_serving_config(config).alerting
    assert stored.channels.webhook.url is None and stored.cooldown.bars == 3
    del config["alerting"]  # a model packaged before the served model alerted: the defaults
    assert read_serving_config(config).alerting == AlertingParams()
    # default: the log and the section's file under the working directory, no webhook
    queue = served_alert_queue(stored, environ={})
    assert [type(channel) for channel in queue.channels] == [LogChannel, JsonLinesChannel]
    assert queue.channels[1].path == tmp_path / "data/08_reporting/alerts/alerts.jsonl"
    assert queue.cooldown.bars == 3 and queue.cooldown.last == {}
    environ = {ALERTS_FILE_ENV: "elsewhere/alerts.jsonl", ALERT_WEBHOOK_ENV: "http://127.0.0.1:9/hook"}
    queue = served_alert_queue(stored, environ=environ)
    assert queue.channels[1].path == tmp_path / "elsewhere/alerts.jsonl"
    assert isinstance(queue.channels[2], WebhookChannel) and queue.channels[2].url == "http://127.0.0.1:9/hook"
    assert [type(channel) for channel in served_alert_queue(stored, environ={ALERTS_FILE_ENV: ""}).channels] == [
        LogChannel
    ]
    with pytest.raises(ConfigError, match=f"{ALERT_WEBHOOK_ENV} must be an http") as refused:
        served_alert_queue(stored, environ={ALERT_WEBHOOK_ENV: "ftp://hooks.example.com/secret-token"})
    assert "secret-token" not in str(refused.value)


def test_a_cooldown_in_seconds_reads_back_the_served_alerts_only(tmp_path, monkeypatch):
    from trading_rl.monitoring.alerting import Alert, Level
    from trading_rl.serving.alerts import served_alert_queue

    path = tmp_path / "alerts.jsonl"
    served = Alert("drawdown", Level.CRITICAL, "m", 0.3, 0.2, "2026-01-02T00:00:00", {"source": "served"}, bar=4)
    forward = Alert("daily_loss", Level.WARNING, "m", 0.04, 0.03, "2026-01-02T00:00:00", {"source": "forward"}, bar=9)
    for alert in (served, forward):
        JsonLinesChannel(path).send(alert)
    seconds = AlertingParams.from_mapping({"cooldown": {"bars": None, "seconds": 3600}}, "alerting")
    queue = served_alert_queue(seconds, environ={ALERTS_FILE_ENV: str(path)})
    assert set(queue.cooldown.last) == {("drawdown", "critical")}
    bars = served_alert_queue(AlertingParams(), environ={ALERTS_FILE_ENV: str(path)})
    assert bars.cooldown.last == {}  # in bars: this server's count starts again, so does its cooldown


@pytest.mark.slow
def test_an_alert_through_the_scoring_server_reaches_the_alerts_file(server, serving_setup):
    prices = serving_setup.prices
    for k, cash in enumerate((100_000.0, 70_000.0)):  # a 30 % fall: drawdown and the bar's loss, critical
        status, body = server.post({"inputs": [request_for(prices.iloc[: len(prices) - 1 + k], {"cash": cash})]})
        assert status == 200, body
    assert server.decider.alerts.flush(FLUSH_S)
    found = {(line["rule"], line["level"]) for line in _lines(server.alerts_file)}
    assert {("drawdown", "critical"), ("daily_loss", "critical")} <= found
