"""Headless Chromium through selenium, for the browser tests and scripts/screenshots.py (not needed to use
`rlvr report` or `rlvr dashboard`: any browser opens their page). selenium is imported only here, lazily."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu")


def _found(path: str) -> str | None:
    return path if Path(path).is_file() else shutil.which(Path(path).name)


def missing() -> str | None:
    """Why a headless browser cannot start here (None: it can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    if _found(CHROMIUM) is None:
        return f"no Chromium at {CHROMIUM} or on PATH (apt-get install chromium)"
    if _found(CHROMEDRIVER) is None:
        return f"no chromedriver at {CHROMEDRIVER} or on PATH (apt-get install chromium-driver)"
    return None


def start_chromium(width: int = 1400, height: int = 1000):
    """A headless Chromium WebDriver that keeps the page's console messages (driver.get_log("browser"))."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = _found(CHROMIUM)
    for flag in (*FLAGS, f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Chromium leaves an org.chromium.Chromium.* directory in the temp directory after each quit: give it one of
    # its own, removed when this process exits, so that test runs do not pile them up in /tmp
    scratch = tempfile.mkdtemp(prefix="rlvr-")  # short: Chromium puts a Unix socket in it (108-byte paths)
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    service = Service(_found(CHROMEDRIVER), env={**os.environ, "TMPDIR": scratch})
    return webdriver.Chrome(service=service, options=options)


def full_page_screenshot(driver, path: Path, width: int = 1400) -> None:
    """Resize the window to the whole page's height, then save a PNG of it."""
    height = driver.execute_script("return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)")
    driver.set_window_size(width, min(int(height) + 40, 16000))
    driver.save_screenshot(str(path))


def element_screenshot(driver, element_id: str, path: Path) -> None:
    """One element of the page as a PNG, whole: the window made tall enough for it, the sticky header (which would
    lie over the element's top) taken out of the flow first."""
    driver.set_window_size(1400, 4000)
    driver.execute_script("const h = document.querySelector('header'); if (h) h.style.position = 'static';")
    element = driver.find_element("id", element_id)
    driver.execute_script("arguments[0].scrollIntoView()", element)
    element.screenshot(str(path))
