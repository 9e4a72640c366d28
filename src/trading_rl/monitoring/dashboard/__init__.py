"""The live monitoring dashboard: what the deployed agent did and does, read from the files and the
registry the rest of the project writes, redrawn while they change.

``sources`` reads (never writes): the forward record and the forward drift report (newest Kedro
version), the served model's decision log (JSON lines, ``decisions.DECISION_FIELDS``), the alerts
file (``monitoring.alerting.JsonLinesChannel``), the price file behind buy-and-hold and each
registered model's ``@champion`` with its gate verdicts. ``panels`` turns them into tables and plotly
figures; both are plain functions, tested without Streamlit. ``app`` is the Streamlit script that
lays the panels out and redraws them (``trading-rl dashboard`` starts it).

Every reader reports a missing, empty or unreadable source as a :class:`SourceProblem` the panel
shows, never as an exception that stops the page.
"""

from trading_rl.monitoring.dashboard.decisions import DECISION_FIELDS, DecisionsRead, read_decisions
from trading_rl.monitoring.dashboard.sources import (
    Champion,
    DashboardSources,
    SourceProblem,
    read_alerts,
    read_champions,
    read_forward_record,
    read_prices_for,
    read_stored_json,
)

__all__ = [
    "DECISION_FIELDS",
    "Champion",
    "DashboardSources",
    "DecisionsRead",
    "SourceProblem",
    "read_alerts",
    "read_champions",
    "read_decisions",
    "read_forward_record",
    "read_prices_for",
    "read_stored_json",
]
