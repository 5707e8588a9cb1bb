"""Driving the web UI in a real headless Chromium (Playwright, Debian's ``chromium``).

:func:`launch` starts the system browser (``shutil.which("chromium")``; ``make setup``
installs it with apt-get when missing), :func:`signed_in` opens a browser context
signed in to a served lake with a key's environment (the sign-in form, as a person
would), :func:`shot` saves a screenshot under ``tests/ui/screenshots/`` (git-ignored)
for a person to look at. Every wait is Playwright's, bounded by its timeouts.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from bench.ui import csrf_of, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = [
    "NARROW",
    "SCREENSHOTS",
    "WIDE",
    "chromium_path",
    "csrf_of",
    "launch",
    "session_client",
    "shot",
    "signed_in",
]

SCREENSHOTS = Path(__file__).parent / "ui" / "screenshots"
WIDE = {"width": 1280, "height": 800}
NARROW = {"width": 390, "height": 844}
#: most milliseconds a page action or expectation waits
TIMEOUT_MS = 20_000


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise AssertionError("no 'chromium' on PATH: 'make setup' installs it (apt-get)")
    return found


@contextlib.contextmanager
def launch() -> Iterator[Browser]:
    """A headless Chromium for the block."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path(),
            headless=True,
            # running as root in a container: Chromium's sandbox needs user namespaces
            args=["--no-sandbox", "--disable-dev-shm-usage"],
        )
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def signed_in(
    browser: Browser, url: str, env: dict[str, str], viewport: dict[str, int] | None = None
) -> Iterator[Page]:
    """A page of a new browser context signed in to the server at ``url`` with the key
    in ``env`` (no key: a ``--no-auth`` server, nothing to sign in to)."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport=viewport or WIDE, accept_downloads=True)  # type: ignore[arg-type]
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = context.new_page()
        page.goto(f"{url}/login")
        if env:
            page.get_by_label("Access key id").fill(env["LIMNO_ACCESS_KEY_ID"])
            page.get_by_label("Secret access key").fill(env["LIMNO_SECRET_ACCESS_KEY"])
            page.get_by_role("button", name="Sign in").click()
        expect(page).to_have_url(re.compile(r"/pools$"), timeout=TIMEOUT_MS)
        yield page
    finally:
        context.close()


def shot(page: Page, name: str, full: bool = True) -> Path:
    """Save a screenshot ``tests/ui/screenshots/NAME.png`` (of the whole page, or with
    ``full`` false of what the window shows)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    return path


@contextlib.contextmanager
def session_client(url: str, env: dict[str, str]) -> Iterator[tuple[httpx.Client, str]]:
    """An HTTP client signed in to the UI as a browser would be (the session cookie),
    and its CSRF token: for checks a browser cannot make (a forged POST)."""
    with httpx.Client(base_url=url, follow_redirects=False, timeout=60) as client:
        sign_in(client, env)
        yield client, csrf_of(client.get("/pools").text)
