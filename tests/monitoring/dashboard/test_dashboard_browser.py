"""The dashboard in a real browser: ``trading-rl dashboard``'s streamlit command on 127.0.0.1,
Debian's headless Chromium driven by Playwright (pointed at that binary; Playwright's own browser
download is never used). A decision and an alert appended to their files appear on the open page
without a reload, and so does a new forward record version (the whole page redrawn). The seconds
from each append to the page are printed (``-s``); the bound asserted is a generous poll, the
latency itself is measured by ``benchmarks/dashboard_latency.py``."""

import importlib.util
import time
from pathlib import Path

import pytest
from dashboard_latency import CHROMIUM, chromium_page, dashboard_server, free_port, open_settled, seconds_until_shown
from helpers.dashboard_sources import append_lines, decision, forward_record, write_sources
from helpers.synthetic_prices import random_walk_prices

from trading_rl.monitoring.alerting import Alert, JsonLinesChannel, Level

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path(CHROMIUM).is_file(), reason=f"headless Chromium not installed at {CHROMIUM} (apt install chromium)"
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None, reason="playwright not installed (pip install playwright)"
    ),
]
# A poll, not a speed requirement: the page refreshes every 0.5 s; on a loaded 2-core machine a
# redraw can take seconds.
SHOWN_WITHIN_S = 15.0
NEW_VERSION = "2026-12-02T10.00.00.000Z"


def test_a_new_decision_alert_and_record_version_appear_on_the_open_page(tmp_path):
    sources = write_sources(tmp_path / "sources")
    with dashboard_server(sources, free_port(), tmp_path / "streamlit.log") as url, chromium_page() as page:
        open_settled(page, url, figures=6)
        assert page.get_by_text("trading_rl_sac_icm@champion → version 1").count() == 1
        marker = f"browser-probe-{time.time_ns()}"
        line = decision("2013-03-05T21:00:00+00:00", 0.4, model_version=marker)
        decision_s = seconds_until_shown(page, lambda: append_lines(sources.decisions, line), marker, SHOWN_WITHIN_S)
        alert = Alert("collapse", Level.CRITICAL, f"collapsed: {marker}", 0.97, 0.95, "2013-03-05T21:00:00")
        alert_s = seconds_until_shown(
            page, lambda: JsonLinesChannel(sources.alerts).send(alert), "collapsed:", SHOWN_WITHIN_S
        )
        longer = forward_record(random_walk_prices(300, seed=5), n_bars=90)

        def new_version():
            file = sources.record / NEW_VERSION / sources.record.name
            file.parent.mkdir()
            longer.to_parquet(file)

        record_s = seconds_until_shown(page, new_version, f"record version {NEW_VERSION}", SHOWN_WITHIN_S)
        page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    print(f"append -> on the page: decision {decision_s:.3f} s, alert {alert_s:.3f} s, record {record_s:.3f} s")
    assert (tmp_path / "dashboard.png").stat().st_size > 50_000  # a drawn page, not a blank one
