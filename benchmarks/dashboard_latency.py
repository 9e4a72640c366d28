"""Seconds from a decision appended to the log to the decision on the dashboard's page, in headless
Chromium (Debian's ``chromium``, driven by Playwright pointed at that binary).

The dashboard runs as ``trading-rl dashboard`` runs it (``commands.streamlit_command``) on
127.0.0.1, over every source the tests write (``tests/helpers/dashboard_sources.py``: a forward
record, drift, alerts, decisions and an MLflow store with a champion). After the page has drawn its
figures, each probe waits a random time, appends one decision with a unique model version and
times until that text is in the page. Each refresh period of ``--refresh-s`` gets its own server,
in turns (A B A B ...) so that a change of the machine's load hits every period alike; the
baseline is the issue's 1 s period against the dashboard's default 0.5 s. The latency is the wait
for the next redraw (half a period on average) plus the redraw and the browser: ``median - period
/ 2`` estimates the latter.

    python benchmarks/dashboard_latency.py [--probes 30] [--refresh-s 0.5 1.0] [--rounds 2]
        [--screenshot docs/results/dashboard_screenshot.png]
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


def save_screenshot(page, path: Path, width: int = 1400) -> None:
    """The whole page as PNG: Streamlit scrolls inside its own container, so the viewport is made as
    tall as the content (a full-page screenshot alone would stop at the first screen)."""
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": width, "height": int(height) + 40})
    page.wait_for_timeout(1500)  # the figures re-laid out at the new size
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))


def probe_latencies(sources, refresh_s: float, probes: int, rng: random.Random, screenshot: Path | None) -> list[float]:
    """Seconds to the page of ``probes`` decisions appended to a dashboard redrawn every ``refresh_s``."""
    from helpers.dashboard_sources import append_lines, decision

    sources = replace(sources, refresh_s=refresh_s)
    log = sources.decisions.parent / "streamlit.log"
    latencies = []
    with dashboard_server(sources, free_port(), log) as url, chromium_page() as page:
        open_settled(page, url, figures=6)
        if screenshot:
            save_screenshot(page, screenshot)
        for probe in range(probes):
            time.sleep(rng.uniform(0.0, 1.0))
            marker = f"probe-{probe}-{time.time_ns()}"
            line = decision("2013-03-05T21:00:00+00:00", 0.4, model_version=marker)
            latencies.append(seconds_until_shown(page, partial(append_lines, sources.decisions, line), marker, 30))
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probes", type=int, default=30, help="per period and round")
    parser.add_argument("--refresh-s", type=float, nargs="+", default=[0.5, 1.0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--screenshot", type=Path, default=None, help="save the settled page as PNG")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))  # the sources the tests write (helpers.dashboard_sources)
    import numpy as np
    from helpers.dashboard_sources import write_sources

    rng = random.Random(0)
    found: dict[float, list[float]] = {period: [] for period in args.refresh_s}
    loads = []
    with tempfile.TemporaryDirectory() as folder:
        sources = write_sources(Path(folder))
        for round_ in range(args.rounds):
            for period in args.refresh_s:
                shot = args.screenshot if round_ == 0 and period == args.refresh_s[0] else None
                found[period] += probe_latencies(sources, period, args.probes, rng, shot)
                loads.append(os.getloadavg()[0])
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, load average {min(loads):.1f} .. {max(loads):.1f}")
    print("| refresh period | probes | median | p90 | max | within 1 s | median - period / 2 |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for period, latencies in found.items():
        seconds = np.array(latencies)
        print(
            f"| {period:g} s | {seconds.size} | {np.median(seconds):.3f} s | {np.quantile(seconds, 0.9):.3f} s | "
            f"{seconds.max():.3f} s | {np.mean(seconds <= 1.0):.0%} | {np.median(seconds) - period / 2:+.3f} s |"
        )
    if len(found) > 1:
        base, *others = args.refresh_s
        for period in others:
            ratio = np.median(found[base]) / np.median(found[period])
            print(f"median latency at {base:g} s / at {period:g} s: {ratio:.2f}x")


if __name__ == "__main__":
    main()
