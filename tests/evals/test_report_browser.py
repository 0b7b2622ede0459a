"""The HTML report in a real browser (Debian's Chromium through Selenium, as the viewer's own
browser tests): its table, and each run id opening that run in the real viewer over the store
the evaluation's runs were saved in. Skips, saying why, without chromium and chromedriver."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    REASON = f"the report's browser test needs {CHROMIUM} and {CHROMEDRIVER} (make ui-deps)"
    pytest.skip(REASON, allow_module_level=True)

import uvicorn  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from agentloop import Agent, ModelRequest, tool  # noqa: E402
from agentloop.evals import Case, Contains, Dataset, EvaluationReport  # noqa: E402
from agentloop.messages import ToolResultPart  # noqa: E402
from agentloop.store import SQLiteStore  # noqa: E402
from agentloop.testing import FunctionModel, call  # noqa: E402
from agentloop.ui.viewer import ViewerApp  # noqa: E402

WAIT = 20.0
ARGUMENTS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--window-size=1280,1000", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-default-apps", "--disable-sync",
)  # fmt: skip


@tool
def lookup(city: str) -> str:
    """Look up the weather in a city."""
    return f"sunny in {city}"


def model(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if last.role == "user":
        return call("lookup", {"city": last.text})
    result = last.parts[0]
    assert isinstance(result, ToolResultPart)
    return f"It is {result.content}."


def evaluated(path: Path) -> EvaluationReport:
    """Two cases, one failing, whose runs are saved in the store at ``path``."""
    store = SQLiteStore(path)
    agent = Agent(FunctionModel(model, model="weather-model"), tools=[lookup], store=store)

    async def task(city: str) -> Any:
        return (await agent.session().run(city)).output  # a stored session per case

    dataset = Dataset(
        cases=[Case(name="paris", inputs="Paris"), Case(name="oslo", inputs="Oslo")],
        evaluators=[Contains("Paris")],
        name="weather",
    )
    try:
        return dataset.evaluate_sync(task)
    finally:
        store.close()


@contextmanager
def viewer(path: Path) -> Iterator[str]:
    app = ViewerApp(str(path), poll_seconds=0.1, hosts=["127.0.0.1"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listener.close()
        app.close()


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ARGUMENTS:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")
        driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(WAIT)
    yield driver
    driver.quit()


def requested_hosts(driver: webdriver.Chrome) -> set[str | None]:
    entries: list[dict[str, Any]] = driver.get_log("performance")  # type: ignore[no-untyped-call]
    urls = [
        json.loads(e["message"])["message"]["params"]["request"]["url"]
        for e in entries
        if json.loads(e["message"])["message"].get("method") == "Network.requestWillBeSent"
    ]
    return {urlsplit(url).hostname for url in urls if not url.startswith(("file:", "data:"))}


def test_the_report_page_and_its_run_links(browser: webdriver.Chrome, tmp_path: Path) -> None:
    store = tmp_path / "agentloop.db"
    report = evaluated(store)
    with viewer(store) as url:
        page = tmp_path / "report.html"
        page.write_text(report.to_html(viewer_url=url), encoding="utf-8")
        browser.get(page.as_uri())
        assert browser.title == "Evaluation: weather"
        assert browser.find_element(By.ID, "pass-rate").text == "pass rate 50%"
        rows = browser.find_elements(By.CSS_SELECTOR, "#cases tbody tr")
        statuses = {r.get_attribute("data-case"): r.get_attribute("class") for r in rows}
        assert statuses == {"paris": "pass", "oslo": "fail"}
        assert "Contains ✘" in rows[1].text and "unknown" in rows[1].text  # an unpriced cost
        assert requested_hosts(browser) <= set()  # the page alone loads nothing
        run_id = report.case("oslo").run_ids[0]
        rows[1].find_element(By.CSS_SELECTOR, "a.run").click()
        WebDriverWait(browser, WAIT).until(lambda d: d.current_url == f"{url}/runs/{run_id}")
        WebDriverWait(browser, WAIT).until(lambda d: "sunny in Oslo" in d.page_source)
        assert "lookup" in browser.page_source
        assert requested_hosts(browser) <= {"127.0.0.1"}
