"""The run viewer in a real browser: Debian's Chromium, driven by Selenium through chromedriver.

A real uvicorn server on 127.0.0.1 serves ``ViewerApp`` over a real SQLite store filled by real
agent runs (``test_viewer.fill_store``: the OpenAI adapter against the fake provider server, and
``ScriptedModel``). Everything is asserted through the DOM: the runs listed and filtered, a
failed run's phase and attempt log, soft errors marked, a paused run's pending calls, a run that
progresses while its page is open (updated over Server-Sent Events without a reload), no key in
the HTML. After every test, Chrome's performance log must show no request to any host but
127.0.0.1. Screenshots are kept under the test's tmp dir; with ``AGENTLOOP_SCREENSHOTS=1`` they
are also copied to ``docs/img/viewer-*.png`` for the docs.

The module skips, saying why, only when chromium or chromedriver is not installed
(``make ui-deps`` installs both).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    REASON = f"the viewer's browser tests need {CHROMIUM} and {CHROMEDRIVER} (make ui-deps)"
    print(f"SKIPPED: {REASON}")
    pytest.skip(REASON, allow_module_level=True)

import uvicorn  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait as _WebDriverWait  # noqa: E402


def WebDriverWait(browser: Any, timeout: float) -> Any:
    """A wait that reads through a live update: an element swapped mid-read is read again."""
    return _WebDriverWait(browser, timeout, ignored_exceptions=(StaleElementReferenceException,))


from agentloop import Agent, tool  # noqa: E402
from agentloop.store import SQLiteStore, StoredRun  # noqa: E402
from agentloop.testing import ScriptedModel  # noqa: E402
from agentloop.testing import call as scripted_call  # noqa: E402
from agentloop.testing import reply as scripted_reply  # noqa: E402
from agentloop.ui.viewer import ViewerApp, agent_continuer  # noqa: E402

_HTTP_TESTS = Path(__file__).with_name("test_viewer.py")
_spec = importlib.util.spec_from_file_location("_viewer_http_tests", _HTTP_TESTS)
assert _spec is not None and _spec.loader is not None
_http = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _http  # its dataclasses look their module up
_spec.loader.exec_module(_http)
FAKE_KEY: str = _http.FAKE_KEY

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
WAIT = 20.0


@dataclass
class Served:
    """The server under test: its URL, app, store file and the runs ``fill_store`` made."""

    url: str
    app: ViewerApp
    path: Path
    runs: Any


@contextmanager
def serving(app: ViewerApp) -> Iterator[str]:
    """``app`` on a real uvicorn server on 127.0.0.1; yields its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # listening before the thread starts: the browser's first connect waits
    port = listener.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listener.close()
        app.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path = tmp_path_factory.mktemp("viewer-browser") / "agentloop.db"
    runs = _http.fill_store(path)
    app = ViewerApp(str(path), poll_seconds=0.1, hosts=["127.0.0.1"])
    with serving(app) as url:
        yield Served(url, app, path, runs)


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1400",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-sync",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")  # Selenium Manager must not look for a driver online
        driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(WAIT)
    yield driver
    driver.quit()


def requested_urls(driver: webdriver.Chrome) -> list[str]:
    """Every URL the pages asked for since the last call (Chrome's performance log)."""
    urls = []
    entries: list[dict[str, Any]] = driver.get_log("performance")  # type: ignore[no-untyped-call]
    for entry in entries:
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


@pytest.fixture(autouse=True)
def only_local_requests(browser: webdriver.Chrome) -> Iterator[None]:
    """After each test: the pages asked no host but 127.0.0.1 for anything."""
    requested_urls(browser)  # what an earlier test left
    yield
    urls = requested_urls(browser)
    assert urls, "the performance log recorded no request"
    foreign = [url for url in urls if urlsplit(url).hostname != "127.0.0.1"]
    assert foreign == []


def screenshot(driver: webdriver.Chrome, directory: Path, name: str) -> Path:
    """Save the page as ``name`` under ``directory`` (and in docs/img when asked to)."""
    target = directory / name
    assert driver.save_screenshot(str(target))
    if os.environ.get("AGENTLOOP_SCREENSHOTS") == "1":
        shutil.copyfile(target, DOCS_IMG / name)
    return target


def rows(driver: webdriver.Chrome) -> list[str]:
    return [
        row.get_attribute("data-run") or ""
        for row in driver.find_elements(By.CSS_SELECTOR, "tr.run")
    ]


def test_the_runs_are_listed_and_filtered(
    browser: webdriver.Chrome, served: Served, tmp_path: Path
) -> None:
    runs = served.runs
    browser.get(served.url + "/")
    assert rows(browser) == [runs.paused, runs.failed, runs.completed]
    screenshot(browser, tmp_path, "viewer-runs.png")
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("failed")
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    WebDriverWait(browser, WAIT).until(lambda d: "status=failed" in d.current_url)
    assert rows(browser) == [runs.failed]
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("")
    Select(browser.find_element(By.ID, "filter-model")).select_by_value("model-b")
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    WebDriverWait(browser, WAIT).until(lambda d: "model=model-b" in d.current_url)
    assert rows(browser) == [runs.paused]


def test_a_failed_run_shows_its_phase_and_attempt_log(
    browser: webdriver.Chrome, served: Served, tmp_path: Path
) -> None:
    browser.get(served.url + "/?status=failed")
    browser.find_element(By.CSS_SELECTOR, "a.run-link").click()
    WebDriverWait(browser, WAIT).until(lambda d: d.find_elements(By.ID, "hard-error"))
    error = browser.find_element(By.ID, "hard-error")
    assert error.find_element(By.CSS_SELECTOR, ".error-class").text == "ProviderUnavailable"
    assert error.find_element(By.CSS_SELECTOR, ".attr-phase td").text == "status"
    assert error.find_element(By.CSS_SELECTOR, ".attr-request_sent td").text == "true"
    attempts = error.find_elements(By.CSS_SELECTOR, "#attempt-log tbody tr")
    assert [row.find_elements(By.TAG_NAME, "td")[3].text for row in attempts] == ["status"] * 3
    screenshot(browser, tmp_path, "viewer-failed-run.png")


def test_soft_errors_are_marked_and_reasoning_is_collapsed(
    browser: webdriver.Chrome, served: Served, tmp_path: Path
) -> None:
    browser.get(f"{served.url}/runs/{served.runs.completed}")
    soft = browser.find_element(By.CSS_SELECTOR, ".call.soft-error")
    badge = soft.find_element(By.CSS_SELECTOR, ".badge.soft-error")
    assert badge.is_displayed() and badge.text == "soft error"
    assert "no entry named 'missing'" in soft.text
    fine = browser.find_element(By.CSS_SELECTOR, ".call:not(.soft-error)")
    assert fine.value_of_css_property("border-left-color") != soft.value_of_css_property(
        "border-left-color"
    )
    reasoning = browser.find_element(By.CSS_SELECTOR, "details.reasoning")
    assert reasoning.get_attribute("open") is None
    assert not reasoning.find_element(By.TAG_NAME, "pre").is_displayed()
    reasoning.find_element(By.TAG_NAME, "summary").click()
    assert reasoning.find_element(By.TAG_NAME, "pre").is_displayed()
    assert browser.find_elements(By.CSS_SELECTOR, "svg.chart rect.bar-in")
    screenshot(browser, tmp_path, "viewer-run.png")


def test_a_paused_run_lists_its_pending_calls(browser: webdriver.Chrome, served: Served) -> None:
    browser.get(f"{served.url}/runs/{served.runs.paused}")
    assert browser.find_element(By.ID, "run-status").text == "paused"
    pending = browser.find_elements(By.CSS_SELECTOR, "#pending .pending-call")
    assert len(pending) == 1
    assert pending[0].find_element(By.CSS_SELECTOR, ".tool").text == "delete_file"
    assert "notes.txt" in pending[0].find_element(By.CSS_SELECTOR, ".arguments").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#pending form")  # read-only


def test_no_key_in_any_page(browser: webdriver.Chrome, served: Served) -> None:
    runs = served.runs
    for path in ("/", f"/runs/{runs.completed}", f"/runs/{runs.failed}", f"/runs/{runs.paused}"):
        browser.get(served.url + path)
        assert FAKE_KEY not in browser.page_source
    browser.get(f"{served.url}/runs/{runs.completed}")
    arguments = browser.find_element(By.CSS_SELECTOR, ".call .arguments").text
    assert '"key": "[REDACTED]"' in arguments


@tool
def step(n: int) -> str:
    """Wait until the test lets step ``n`` finish."""
    GATES.reached[n].set()
    assert GATES.go[n].wait(timeout=60), "the test never let the step finish"
    return f"step {n} done"


class _Gates:
    def __init__(self) -> None:
        self.reached = [threading.Event(), threading.Event()]
        self.go = [threading.Event(), threading.Event()]


GATES = _Gates()


def test_a_run_in_progress_updates_without_a_reload(
    browser: webdriver.Chrome, served: Served, tmp_path: Path
) -> None:
    script = [
        scripted_call("step", {"n": 0}),
        scripted_call("step", {"n": 1}),
        scripted_reply("counted"),
    ]
    store = SQLiteStore(served.path)
    agent = Agent(ScriptedModel(script, model="model-live"), tools=[step], store=store)
    worker = threading.Thread(target=lambda: agent.session("live").run_sync("count"))
    worker.start()
    try:
        assert GATES.reached[0].wait(timeout=WAIT)
        scanned = served.app.reader.scan()
        (run_id,) = [
            r.run.id for r in scanned if isinstance(r, StoredRun) and r.session_id == "live"
        ]
        browser.get(f"{served.url}/runs/{run_id}")
        assert browser.find_element(By.ID, "run-status").text == "running"
        assert browser.find_elements(By.CSS_SELECTOR, "#turns .turn") == []
        browser.execute_script("window.loadedOnce = 'yes';")
        GATES.go[0].set()
        assert GATES.reached[1].wait(timeout=WAIT)
        WebDriverWait(browser, WAIT).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#turns .turn")
        )
        WebDriverWait(browser, WAIT).until(
            lambda d: "step 0 done" in d.find_element(By.ID, "turns").text
        )
        screenshot(browser, tmp_path, "viewer-live.png")
        GATES.go[1].set()
        WebDriverWait(browser, WAIT).until(
            lambda d: d.find_element(By.ID, "run-status").text == "completed"
        )
        WebDriverWait(browser, WAIT).until(
            lambda d: d.find_element(By.ID, "live").get_attribute("data-ended") == "true"
        )
        assert len(browser.find_elements(By.CSS_SELECTOR, "#turns .turn")) == 3
        assert browser.execute_script("return window.loadedOnce;") == "yes"  # never reloaded
    finally:
        for gate in GATES.go:
            gate.set()
        worker.join(timeout=WAIT)
        store.close()


def test_a_pending_call_approved_in_the_page_continues_the_run(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    path = tmp_path / "agentloop.db"
    agent, paused, store = _http._paused_agent(path)
    app = ViewerApp(
        str(path),
        allow_decisions=True,
        continuer=agent_continuer(agent),
        poll_seconds=0.1,
        hosts=["127.0.0.1"],
    )
    try:
        with serving(app) as url:
            browser.get(f"{url}/runs/{paused.id}")
            form = browser.find_element(By.ID, "decisions")
            approve = form.find_element(By.CSS_SELECTOR, "input[value='approve']")
            assert approve.is_selected()
            screenshot(browser, tmp_path, "viewer-decide.png")
            form.find_element(By.CSS_SELECTOR, "button[type='submit']").click()
            WebDriverWait(browser, WAIT).until(
                lambda d: d.find_element(By.ID, "run-status").text == "completed"
            )
            assert "deleted old.log" in browser.find_element(By.ID, "turns").text
            assert browser.find_elements(By.ID, "decided")
    finally:
        store.close()
