"""One platform and one headless Chromium (Debian's, driven by Playwright) per module; a fresh
browser context per test, so no test inherits another's token."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from loom.client import LoomClient
from loom.ui.routes import static_dir
from tests.conftest import Server, stop_deployments
from tests.ui.browser import DESKTOP, shoot

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

OUTCOME = pytest.StashKey[pytest.TestReport]()

# Playwright's 5 s is short for a page that waits on a loaded 2-core machine.
expect.set_options(timeout=20_000)


@pytest.fixture(scope="module")
def platform_settings() -> dict[str, str]:
    """The module's platform's settings, as LOOM_* variables; a module overrides this."""
    return {}


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, platform_settings: dict[str, str]
) -> Iterator[Server]:
    """A real platform on loopback, serving the built UI at /ui/."""
    if not (static_dir() / "index.html").is_file():
        pytest.fail("the web UI is not built: run `make ui` (it needs Node.js and npm)")
    server = Server(tmp_path_factory.mktemp("ui") / "home", **platform_settings).start()
    yield server
    server.stop()
    stop_deployments(server.home)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.is_file():
        pytest.fail("chromium is not installed: run `make browser-tools`")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[OUTCOME] = report
    return report


@pytest.fixture
def open_page(
    browser: Browser, platform: Server, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Page]]:
    """Opens a page in a fresh context, `options` going to the context. An uncaught error in
    the page, or anything the content security policy blocks, fails the test at its end; a
    failed test leaves its pages' screenshots as failed-<test>-<n>.png."""
    contexts = []
    problems: list[str] = []

    def blocked(text: str) -> None:
        if "Content Security Policy" in text:
            problems.append(text)

    def opened(**options: Any) -> Page:
        context = browser.new_context(base_url=platform.url, **{"viewport": DESKTOP, **options})
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
        page.on("console", lambda message: blocked(message.text))
        return page

    yield opened
    report = request.node.stash.get(OUTCOME, None)
    for n, context in enumerate(contexts):
        if report is not None and report.failed:
            for page in context.pages:
                shoot(page, f"failed-{request.node.name}-{n}")
        context.close()
    assert not problems, "\n".join(problems)


@pytest.fixture
def page(open_page: Callable[..., Page]) -> Page:
    return open_page()


@pytest.fixture
def client(platform: Server) -> Iterator[LoomClient]:
    """The admin's API client."""
    with platform.client() as admin:
        yield admin
