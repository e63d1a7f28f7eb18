"""Debian's Chromium, headless, driven by Selenium through Debian's chromedriver, for the tests
that look at pages as a person does (the dashboard, a results folder's index.html)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

#: without these, Chromium reaches for Google's hosts at every start, which this closed network refuses
QUIET = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1100")

T = TypeVar("T")


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (a Selenium WebDriver), quit on the way out with its profile removed."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (make setup installs the test extras)")
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.skip("Debian's chromium and chromium-driver are not installed (make setup installs them)")
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not look for drivers online
    profile = tempfile.mkdtemp(prefix="mlfabric-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (*QUIET, f"--user-data-dir={profile}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(check: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """``check()``'s first truthy value, polled; fails naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"the page never showed {what}"
        time.sleep(0.2)


def screenshot(driver: Any, name: str) -> Path:
    """A PNG of the page: into $MLFABRIC_SCREENSHOTS (docs/img when making the docs' pictures),
    else the temporary folder."""
    folder = Path(os.environ.get("MLFABRIC_SCREENSHOTS") or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    driver.save_screenshot(str(path))
    return path
