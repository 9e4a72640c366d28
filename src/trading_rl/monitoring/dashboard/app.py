"""The Streamlit script of the monitoring dashboard: ``trading-rl dashboard`` runs
``streamlit run app.py -- <DashboardSources.to_argv()>``.

One fragment redraws on its own (``st.fragment(run_every=refresh_s)``, default 0.5 s, so a new
decision or alert is on the page within one second of being written, redraw included): the decisions
and alerts. On each of its runs it also checks (``os.stat``) the files behind the other panels and, every
``registry_refresh_s``, reads the champions; only when one of them changed is the whole page drawn
again (``st.rerun``). The forward record changes once per rerun and the champion once per promotion:
redrawing their seven plotly figures twice a second would cost the browser far more than the check.
Every panel shows its source's problem (``sources.SourceProblem``) instead of its data; nothing
that a file holds stops the page.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from trading_rl.monitoring.dashboard import panels
from trading_rl.monitoring.dashboard.decisions import DecisionLogReader
from trading_rl.monitoring.dashboard.sources import (
    Champion,
    DashboardSources,
    SourceProblem,
    price_file,
    read_alerts,
    read_champions,
    read_forward_record,
    read_prices_for,
    read_stored_json,
    stored_file,
)

DEFAULT_PERIODS_PER_YEAR = 252.0
# The session-state key of what the record and registry panels were drawn from.
DRAWN_FROM = "dashboard_drawn_from"
SHOWN_PROBLEMS = 5
# The session-state key of the alerts last read and the file state they were read at.
ALERTS_READ = "dashboard_alerts_read"


def _show(problem: SourceProblem) -> None:
    (st.error if problem.level == "error" else st.info)(problem.message)


def _signature(path: Path) -> tuple[str, int, int] | None:
    """What a cached read of ``path`` is keyed on: the newest version's file, its mtime and size."""
    found = stored_file(path)
    try:
        status = found[0].stat() if found is not None else None
    except FileNotFoundError:  # removed between the listing and the stat
        return None
    return None if found is None or status is None else (str(found[0]), status.st_mtime_ns, status.st_size)


@st.cache_data(max_entries=4, show_spinner=False)
def _cached_record(path: str, signature: Any) -> pd.DataFrame | SourceProblem:
    return read_forward_record(Path(path))


@st.cache_data(max_entries=8, show_spinner=False)
def _cached_json(path: str, what: str, signature: Any) -> dict[str, Any] | SourceProblem:
    return read_stored_json(Path(path), what)


@st.cache_data(max_entries=4, show_spinner=False)
def _cached_close(path: str, symbol: str, signature: Any) -> pd.Series | SourceProblem:
    return read_prices_for(Path(path), symbol)


def champion_panel(champions: list[Champion] | SourceProblem) -> None:
    st.subheader("Deployed model")
    if isinstance(champions, SourceProblem):
        _show(champions)
        return
    for champion in champions:
        name = f"{champion.registered_model}@{champion.alias}"
        if champion.version is None:
            st.warning(f"{name}: {champion.note}")
            continue
        st.markdown(panels.champion_summary(champion))
        if champion.gates:
            st.table(panels.gates_table(champion.gates))
        else:
            st.warning(f"{name} carries no gate verdict")


def decisions_panel(sources: DashboardSources) -> None:
    st.subheader("Served model decisions")
    readers = st.session_state.setdefault("decision_readers", {})
    reader = readers.setdefault(str(sources.decisions), DecisionLogReader(sources.decisions))
    log = reader.read()
    if not log.exists:
        st.info(f"no decision log at {sources.decisions} yet: the served model appends one line per decision")
        return
    for problem in log.problems[:SHOWN_PROBLEMS]:
        st.warning(problem)
    if log.skipped > SHOWN_PROBLEMS:
        st.warning(f"{log.skipped} line(s) of {sources.decisions} left out in all (first {SHOWN_PROBLEMS} above)")
    decisions = log.decisions
    if decisions.empty:
        st.info(f"the decision log {sources.decisions} holds no decision yet")
        return
    st.markdown(panels.decision_summary(decisions.iloc[-1].to_dict(), log.count))
    st.table(panels.recent_decisions(decisions, sources.recent_rows))


def alerts_panel(sources: DashboardSources) -> None:
    st.subheader("Active alerts")
    signature = _signature(sources.alerts)
    memo = st.session_state.get(ALERTS_READ)
    if memo is None or memo[0] != (sources.alerts, signature):  # read again only when the file changed
        memo = ((sources.alerts, signature), read_alerts(sources.alerts))
        st.session_state[ALERTS_READ] = memo
    alerts = memo[1]
    if isinstance(alerts, SourceProblem):
        _show(alerts)
        return
    if not alerts:
        st.success(f"no alert in {sources.alerts}")
        return
    st.caption("The newest alert of each rule, most severe first")
    st.table(panels.active_alerts(alerts))
    with st.expander(f"The {min(len(alerts), sources.recent_rows)} newest of {len(alerts)} alert(s)"):
        st.table(panels.recent_alerts(alerts, sources.recent_rows))


def _file_signatures(sources: DashboardSources) -> tuple[Any, ...]:
    """What the record, report, drift and price panels were drawn from (cheap: a few ``stat``)."""
    report = _cached_json(str(sources.report), "forward report", _signature(sources.report))
    symbol = report.get("symbol") if isinstance(report, dict) else None
    prices = price_file(sources.prices, symbol) if symbol else None
    return (
        _signature(sources.record),
        _signature(sources.report),
        _signature(sources.drift),
        None if prices is None else _signature(prices),
    )


def _redraw_when_changed(sources: DashboardSources) -> None:
    """A full rerun (``st.rerun``) when a file of the record's panels changed since the page was
    drawn, or, at most every ``registry_refresh_s``, when the champions did."""
    drawn = st.session_state.get(DRAWN_FROM)
    if drawn is None:
        return
    if _file_signatures(sources) != drawn["files"]:
        st.rerun(scope="app")
    if time.monotonic() - drawn["registry_read_at"] >= sources.registry_refresh_s:
        drawn["registry_read_at"] = time.monotonic()
        if read_champions(sources.tracking_uri, sources.registered_models, sources.alias) != drawn["champions"]:
            st.rerun(scope="app")


def live_panels(sources: DashboardSources) -> None:
    _redraw_when_changed(sources)
    drawn = datetime.now().isoformat(sep=" ", timespec="milliseconds")
    st.caption(f"decisions and alerts redrawn every {sources.refresh_s:g} s; last {drawn}")
    decisions_panel(sources)
    alerts_panel(sources)


def _buy_and_hold(sources: DashboardSources, record: pd.DataFrame, symbol: str | None) -> pd.Series | None:
    if symbol is None:
        st.info("no buy-and-hold line: the forward report names no symbol yet")
        return None
    file = price_file(sources.prices, symbol)
    close = _cached_close(str(sources.prices), symbol, None if file is None else _signature(file))
    if isinstance(close, SourceProblem):
        _show(close)
        return None
    try:
        return panels.buy_and_hold_equity(record, close)
    except (TypeError, ValueError) as error:  # e.g. time zones of record and prices that do not compare
        st.info(f"no buy-and-hold line: the prices of {symbol} do not align with the record ({error})")
        return None


def _headline(record: pd.DataFrame, periods_per_year: float) -> None:
    numbers = panels.headline(record, periods_per_year)
    columns = st.columns(6)
    columns[0].metric("forward bars", int(numbers["bars"]))
    columns[1].metric("last bar", f"{record['timestamp'].iloc[-1]:%Y-%m-%d}")
    columns[2].metric("equity", f"{numbers['equity']:,.2f}")
    columns[3].metric("return", f"{numbers['total_return']:+.2%}")
    columns[4].metric("max drawdown", f"{numbers['max_drawdown']:.1%}")
    sharpe = numbers["sharpe"]
    columns[5].metric("Sharpe (annualised)", "n/a" if sharpe != sharpe else f"{sharpe:.2f}")


def record_panels(sources: DashboardSources) -> None:
    st.subheader("Forward record")
    record = _cached_record(str(sources.record), _signature(sources.record))
    if isinstance(record, SourceProblem):
        _show(record)
        return
    if record.empty:
        st.info(
            f"the forward record {sources.record} is empty: no bar after the deployed model's data end has been "
            "scored yet"
        )
        return
    report = _cached_json(str(sources.report), "forward report", _signature(sources.report))
    report = report if isinstance(report, dict) else {}
    periods_per_year = float(report.get("periods_per_year") or DEFAULT_PERIODS_PER_YEAR)
    st.caption(
        f"record version {record.attrs.get('version') or '(unversioned file)'}, model "
        f"{record['model_version'].iloc[-1] if 'model_version' in record else '?'}, {periods_per_year:g} bars a year"
    )
    _headline(record, periods_per_year)
    buy_and_hold = _buy_and_hold(sources, record, report.get("symbol"))
    left, right = st.columns(2)
    left.plotly_chart(panels.equity_figure(record, buy_and_hold), key="equity")
    right.plotly_chart(panels.drawdown_figure(record), key="drawdown")
    left.plotly_chart(panels.rolling_sharpe_figure(record, sources.sharpe_window, periods_per_year), key="sharpe")
    right.plotly_chart(panels.position_figure(record), key="position")
    left.plotly_chart(
        panels.action_figure(record["action_raw"], sources.hold_threshold, "Action distribution (forward bars)"),
        key="actions",
    )
    with right:
        st.markdown("**Recent trades**")
        trades = panels.recent_trades(record, sources.recent_rows)
        if len(trades):
            st.table(trades)
        else:
            st.info("no trade in the forward record")


def drift_panel(sources: DashboardSources) -> None:
    st.subheader("Drift per feature")
    drift = _cached_json(str(sources.drift), "forward drift report", _signature(sources.drift))
    if isinstance(drift, SourceProblem):
        _show(drift)
        return
    table = panels.drift_table(drift)
    if table.empty or not {"feature", "psi", "drifted"} <= set(table.columns):
        st.info(f"the forward drift report {sources.drift} holds no feature rows ({drift.get('status', 'no bars')})")
        return
    window = drift.get("window") or {}
    st.caption(
        f"window {window.get('first_bar', '?')} .. {window.get('last_bar', '?')} against {window.get('reference')}"
    )
    st.plotly_chart(panels.drift_figure(table), key="drift")
    actions = drift.get("actions") or {}
    if actions:
        st.markdown(
            f"Actions: PSI {actions.get('psi', float('nan')):.3f} against the validation split"
            + (" — **drifted**" if actions.get("drifted") else "")
        )


def render_page(argv: list[str]) -> None:
    st.set_page_config(page_title="trading_rl monitor", layout="wide")
    st.title("trading_rl: live monitor")
    try:
        sources = DashboardSources.from_argv(argv)
    except ValueError as error:
        st.error(str(error))
        return
    champions = read_champions(sources.tracking_uri, sources.registered_models, sources.alias)
    st.session_state[DRAWN_FROM] = {
        "files": _file_signatures(sources),
        "champions": champions,
        "registry_read_at": time.monotonic(),
    }
    champion_panel(champions)
    st.fragment(run_every=sources.refresh_s)(live_panels)(sources)
    record_panels(sources)
    drift_panel(sources)


if __name__ == "__main__":
    render_page(sys.argv[1:])
