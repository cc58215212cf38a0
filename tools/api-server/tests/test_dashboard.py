"""The dashboard (GET /) in a real headless browser (Debian's chromium): the page loads from a server
holding known samples, its script fetches /steps/daily and draws it; the totals read from the rendered
DOM equal the API's. A screenshot is saved for a person to look at (its path is printed)."""

from __future__ import annotations

import html.parser
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ServerProcess, make_sample

BROWSER_DEADLINE_S = 90


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium (tools/test installs Debian's chromium package)")


def browse(url: str, work: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
               "--disable-dev-shm-usage", f"--user-data-dir={work / 'profile'}", "--virtual-time-budget=10000",
               "--run-all-compositor-stages-before-draw", *extra, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=BROWSER_DEADLINE_S,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(work), "TZ": "UTC"})


class Rows(html.parser.HTMLParser):
    """data-date / data-merged / data-raw of the chart's bars, and the table's cells."""

    def __init__(self) -> None:
        super().__init__()
        self.bars: dict[str, tuple[int, int]] = {}
        self.cells: list[str] = []
        self.in_cell = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "rect" and "data-date" in attributes:
            self.bars[attributes["data-date"]] = (int(attributes["data-merged"]), int(attributes["data-raw"]))
        self.in_cell = tag == "td"

    def handle_data(self, data):
        if self.in_cell:
            self.cells.append(data)
            self.in_cell = False


def test_the_dashboard_shows_the_daily_totals(tmp_path):
    server = ServerProcess(tmp_path, single_user=True).start()
    try:
        # Two sources overlapping on 2024-01-01 (the Watch wins there), the iPhone alone on 2024-01-02.
        watch = [make_sample(n, prefix="w", sourceBundleId="com.apple.health.W", sourceDeviceName="Apple Watch",
                             count=300) for n in range(0, 10)]
        phone = [make_sample(n, prefix="p", sourceBundleId="com.apple.health.P", sourceDeviceName="iPhone",
                             count=100) for n in list(range(0, 10)) + list(range(1440, 1450))]
        assert server.post(watch + phone).json()["saved"] == 30
        api = server.session.get(server.url + "/steps/daily", params={"tz": "UTC", "from": "2023-12-31", "to": "2024-01-03"},
                                 timeout=30).json()
        expected = {row["date"]: (row["merged"], row["raw"]) for row in api["days"]}
        assert expected["2024-01-01"] == (3000, 4000) and expected["2024-01-02"] == (1000, 1000)

        page = f"{server.url}/?tz=UTC&from=2023-12-31&to=2024-01-03&view=sources"
        result = browse(page, tmp_path, "--dump-dom")
        assert result.returncode == 0, result.stderr[-2000:]
        rows = Rows()
        rows.feed(result.stdout)
        assert rows.bars == expected, result.stdout[-3000:]
        assert "2024-01-01" in rows.cells and "3,000" in rows.cells and "4,000" in rows.cells  # as the chart's labels read
        assert "com.apple.health.W (Apple Watch)" in result.stdout  # the per-source legend

        screenshot = tmp_path / "dashboard.png"
        result = browse(page, tmp_path, f"--screenshot={screenshot}", "--window-size=1100,800", "--hide-scrollbars")
        assert result.returncode == 0 and screenshot.stat().st_size > 10_000, result.stderr[-2000:]
        kept = Path(__file__).resolve().parent.parent / "data" / "dashboard-test.png"
        kept.parent.mkdir(exist_ok=True)
        shutil.copyfile(screenshot, kept)
        print(f"\ndashboard screenshot: {kept}")
    finally:
        server.finish()


def test_with_tokens_the_page_asks_for_one(tmp_path):
    server = ServerProcess(tmp_path).start()
    try:
        result = browse(f"{server.url}/?tz=UTC&from=2024-01-01&to=2024-01-02", tmp_path, "--dump-dom")
        assert result.returncode == 0, result.stderr[-2000:]
        # What to do, not the API's message.
        assert "This server wants a token: enter yours above (tools/api-server/run tokens create --user NAME prints one)." in result.stdout
        assert "Authorization" not in result.stdout.split("<script>")[0]
        assert 'id="tokenLabel" hidden' not in result.stdout
    finally:
        server.finish()


def test_without_a_range_an_older_export_shows_its_last_90_days(tmp_path):
    """Samples of January 2024 only (an export imported long ago): the default 90 days to today are
    empty, so the page shows the 90 days to the last day with steps, and says so."""
    server = ServerProcess(tmp_path, single_user=True).start()
    try:
        phone = [make_sample(n, prefix="p", sourceBundleId="com.apple.health.P", sourceDeviceName="iPhone", count=1_234)
                 for n in list(range(0, 10)) + list(range(1440, 1450))]
        assert server.post(phone).json()["saved"] == 20
        result = browse(f"{server.url}/?tz=UTC", tmp_path, "--dump-dom")
        assert result.returncode == 0, result.stderr[-2000:]
        rows = Rows()
        rows.feed(result.stdout)
        assert len(rows.bars) == 90 and max(rows.bars) == "2024-01-02", result.stdout[-3000:]
        assert rows.bars["2024-01-01"] == (12_340, 12_340) and rows.bars["2024-01-02"] == (12_340, 12_340)
        assert "12,340" in rows.cells
        assert "No steps in the 90 days to " in result.stdout and "these are the 90 days to 2024-01-02, the last day with steps." in result.stdout
    finally:
        server.finish()
