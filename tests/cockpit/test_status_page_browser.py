"""The status page of `mqctl serve --metrics-address` in a real headless Chromium (Debian's
chromium and chromium-driver, driven by Selenium). The setup installs them with apt-get when it
can (root, apt-get present); otherwise the test is skipped and says why."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cockpit_fixtures import broker_set, cockpit_cluster
from harness import Beater

from mqctl.client import ControllerClient
from mqctl.localgroup import wait_until

pytestmark = pytest.mark.slow

PACKAGES = ["chromium", "chromium-driver"]


def _browser() -> tuple[str, str]:
    """(chromium, chromedriver), installing Debian's packages if missing and possible; else skip."""
    found = shutil.which("chromium"), shutil.which("chromedriver")
    if all(found):
        return found[0] or "", found[1] or ""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip(
            "headless browser test: Debian's chromium and chromium-driver are not installed and "
            "this user cannot install them (needs root and apt-get): apt-get install " + " ".join(PACKAGES)
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        done = subprocess.run(
            ["apt-get", "install", "-y", "-q", *PACKAGES],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        if done.returncode != 0:  # an old package list: update once, then again
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=300, env=env)
            done = subprocess.run(
                ["apt-get", "install", "-y", "-q", *PACKAGES],
                capture_output=True,
                text=True,
                timeout=600,
                env=env,
            )
    except subprocess.TimeoutExpired:
        pytest.skip("headless browser test: apt-get install chromium chromium-driver timed out")
    found = shutil.which("chromium"), shutil.which("chromedriver")
    if not all(found):
        pytest.skip(
            "headless browser test: apt-get install chromium chromium-driver failed: "
            + (done.stderr.strip().splitlines() or ["no output"])[-1]
        )
    return found[0] or "", found[1] or ""


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium, chromedriver = _browser()
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is a test dependency (.[dev])")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(chromedriver), options=options)
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.mark.timeout(1800)  # the first run may install chromium (apt-get) in its setup
def test_status_page_in_a_browser(driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    cluster, http = cockpit_cluster(tmp_path / "ctl", 1)
    client = ControllerClient(cluster.addresses)
    beater = Beater(client)
    try:
        broker_set(client, beater, "broker-a", alive=2)
        broker_set(client, beater, "broker-b", alive=1, dead=1)

        def loaded() -> str | None:  # a heartbeat of the test's beater may come late on a loaded machine
            driver.get(f"http://{http['node0']}/")
            text = str(driver.find_element(By.ID, "summary").text)
            return text if text == "WARN broker-b: replica 2 is not alive" else None

        wait_until(loaded, 30, what="the status page's summary")
        assert driver.title == "mqctl controller mqctl"
        rows = driver.find_elements(By.CSS_SELECTOR, "#broker-sets tr")
        cells = {r.find_elements(By.TAG_NAME, "td")[1].text: r for r in rows[1:]}
        assert sorted(cells) == ["broker-a", "broker-b"]
        a_verdict = cells["broker-a"].find_element(By.CSS_SELECTOR, "td:nth-child(3) span")
        b_verdict = cells["broker-b"].find_element(By.CSS_SELECTOR, "td:nth-child(3) span")
        assert (a_verdict.text, b_verdict.text) == ("OK", "WARN")
        # the page's own style sheet applied (no external asset to load)
        assert a_verdict.value_of_css_property("color") in ("rgba(23, 105, 42, 1)", "rgb(23, 105, 42)")
        assert "not alive" in cells["broker-b"].text
        peers = driver.find_elements(By.CSS_SELECTOR, "#controller tr")
        assert len(peers) == 2 and "yes" in peers[1].text
        driver.save_screenshot(str(tmp_path / "status.png"))
        assert (tmp_path / "status.png").stat().st_size > 0
        failed = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        assert not failed, failed  # nothing the page refers to is missing or refused
    finally:
        beater.stop()
        client.close()
        cluster.stop()
