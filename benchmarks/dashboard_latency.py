"""Seconds from a decision appended to the log to the decision on the dashboard's page, in headless
Chromium (Debian's ``chromium``, driven by Playwright pointed at that binary).

The dashboard runs as ``trading-rl dashboard`` runs it (``commands.streamlit_command``) on
127.0.0.1, over every source the tests write (``tests/helpers/dashboard_sources.py``: a forward
record, drift, alerts, decisions and an MLflow store with a champion). After the page has drawn its
figures, each probe waits a random fraction of the refresh period, appends one decision with a
unique model version and times until that text is in the page. The baseline, measured the same
way in the same process, is the refresh period itself: the latency is at most one period plus one
redraw, so ``latency - period`` is the cost of the redraw and the browser.

    python benchmarks/dashboard_latency.py [--probes 30] [--refresh-s 0.5] [--screenshot docs/images/dashboard.png]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
# What keeps Chromium off the network and working as root in a container.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def dashboard_server(sources, port: int, log: Path, start_timeout_s: float = 90.0) -> Iterator[str]:
    """The dashboard on ``127.0.0.1:port`` until the block ends (its process group is stopped);
    yields its URL once Streamlit's health endpoint answers."""
    from trading_rl.commands import streamlit_command

    with open(log, "w") as output:
        server = subprocess.Popen(
            streamlit_command(sources, "127.0.0.1", port),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                    if answer.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the dashboard did not start on {url}: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@contextlib.contextmanager
def chromium_page(width: int = 1400, height: int = 1000) -> Iterator:
    """A Playwright page in Debian's headless Chromium (never Playwright's own browser download)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def open_settled(page, url: str, figures: int, timeout_s: float = 90.0) -> None:
    """Load the page and wait until its decisions and ``figures`` plotly figures are drawn."""
    page.goto(url, timeout=timeout_s * 1000)
    page.get_by_text("Latest decision").first.wait_for(timeout=timeout_s * 1000)
    page.wait_for_function(
        f"document.querySelectorAll('.js-plotly-plot').length >= {figures}", timeout=timeout_s * 1000
    )


def seconds_until_shown(page, append: Callable[[], None], text: str, timeout_s: float) -> float:
    """Seconds from ``append()`` (a write to a source) until ``text`` is in the page."""
    append()
    start = time.perf_counter()
    page.get_by_text(text).first.wait_for(state="attached", timeout=timeout_s * 1000)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probes", type=int, default=30)
    parser.add_argument("--refresh-s", type=float, default=0.5)
    parser.add_argument("--screenshot", type=Path, default=None, help="save the settled page as PNG")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))  # the sources the tests write (helpers.dashboard_sources)
    import numpy as np
    from helpers.dashboard_sources import append_lines, decision, write_sources

    with tempfile.TemporaryDirectory() as folder:
        sources = replace(write_sources(Path(folder)), refresh_s=args.refresh_s)
        log = Path(folder) / "streamlit.log"
        with dashboard_server(sources, free_port(), log) as url, chromium_page() as page:
            open_settled(page, url, figures=6)
            if args.screenshot:
                args.screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.screenshot), full_page=True)
            rng = random.Random(0)
            latencies = []
            for probe in range(args.probes):
                time.sleep(rng.uniform(0.0, args.refresh_s))
                marker = f"probe-{probe}-{time.time_ns()}"
                line = decision("2013-03-05T21:00:00+00:00", 0.4, model_version=marker)
                latencies.append(seconds_until_shown(page, partial(append_lines, sources.decisions, line), marker, 30))
    seconds = np.array(latencies)
    print(f"{platform.processor() or platform.machine()}, load average {os.getloadavg()[0]:.1f}")
    print(f"refresh period (baseline): {args.refresh_s:.2f} s, {args.probes} probes")
    print(
        f"append -> on the page: median {np.median(seconds):.3f} s, p90 {np.quantile(seconds, 0.9):.3f} s, "
        f"max {seconds.max():.3f} s; share within 1 s: {np.mean(seconds <= 1.0):.0%}"
    )
    redraw = np.median(seconds) - args.refresh_s / 2  # the median wait for the next period is half of it
    print(
        f"max / period: {seconds.max() / args.refresh_s:.2f}x; median - period / 2 (redraw + browser): {redraw:+.3f} s"
    )


if __name__ == "__main__":
    main()
