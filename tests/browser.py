"""Headless Chromium for the report tests: where it is, and the flags that keep it offline."""

from __future__ import annotations

import os
import shutil

import pytest

# No name resolves and every request goes to a closed port: a page that needs the network shows it.
OFFLINE = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=127.0.0.1:9",
]


def chromium() -> str:
    """The browser's path; a missing browser fails on CI (``tasks.py test`` installs it) and skips elsewhere."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing; `python3 tasks.py test` installs it")
        pytest.skip("no chromium on this machine")
    return browser
