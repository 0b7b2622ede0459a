"""What the viewer shows of unexpected exceptions, unpriced and failed runs, and paused runs.

In Debian's Chromium through Selenium, over a real uvicorn server on 127.0.0.1 and a SQLite
store filled by real agent runs (``ScriptedModel`` and ``FunctionModel``, no provider):

- a run ended by an exception the engine did not expect shows its class, its message and the
  innermost frames of its traceback (file, line, function, source line), with no key in them;
- an unpriced model's run costs ``unknown``, never ``$0``; so does a run that failed before any
  turn was recorded; a priced run that failed after a turn costs at least that turn;
- a paused run counts its waiting turn and that turn's calls.

The module skips, saying why, only when chromium or chromedriver is not installed.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    REASON = f"the viewer's browser tests need {CHROMIUM} and {CHROMEDRIVER} (make ui-deps)"
    print(f"SKIPPED: {REASON}")
    pytest.skip(REASON, allow_module_level=True)

import uvicorn  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from agentloop import Agent, tool  # noqa: E402
from agentloop.errors import InternalError, ProviderUnavailable  # noqa: E402
from agentloop.messages import Message, ToolCallPart, Usage  # noqa: E402
from agentloop.model import ModelRequest, ModelResponse  # noqa: E402
from agentloop.store import SQLiteStore  # noqa: E402
from agentloop.testing import FunctionModel, ScriptedModel, reply  # noqa: E402
from agentloop.ui.viewer import ViewerApp  # noqa: E402

FAKE_KEY = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
PRICED = "gpt-4o-mini"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (needs a person's approval)."""
    return f"refunded {order}"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


def broken_client(request: ModelRequest) -> ModelResponse:
    """A model client with a bug: a lookup that raises KeyError, a key in the failing line."""
    settings: dict[str, str] = {}
    return ModelResponse(Message.assistant(settings["sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"]))


@dataclass(frozen=True)
class Runs:
    """The runs the store holds, by what they show."""

    unexpected: str
    unpriced: str
    paused: str
    failed_after_a_turn: str


def fill(path: Path) -> Runs:
    store = SQLiteStore(str(path))
    try:
        broken = Agent(FunctionModel(broken_client), store=store, session_id="bug")
        with pytest.raises(InternalError):
            broken.run_sync("Where is my order?")
        local = ScriptedModel([reply("Hello.", usage=Usage(120, 8))], model="my-local-llama")
        unpriced = Agent(local, store=store, session_id="local").run_sync("Hi")
        ask = ModelResponse(
            Message.assistant("Checking.", [ToolCallPart("c0", "refund", {"order": "A-17"})]),
            usage=Usage(800, 30),
            stop_reason="tool_use",
        )
        asking = ScriptedModel([ask], model=PRICED)
        paused = Agent(asking, tools=[refund], store=store, session_id="support").run_sync("Refund")
        assert paused.paused
        turn = ModelResponse(
            Message.assistant("", [ToolCallPart("c1", "lookup", {"order": "A-17"})]),
            usage=Usage(1000, 40),
            stop_reason="tool_use",
        )
        down = ScriptedModel([turn, ProviderUnavailable("the provider is down")], model=PRICED)
        failing = Agent(down, tools=[lookup], store=store, session_id="outage")
        with pytest.raises(ProviderUnavailable):
            failing.run_sync("Where is A-17?")
    finally:
        store.close()
    return Runs(broken.runs[-1].id, unpriced.id, paused.id, failing.runs[-1].id)


@dataclass
class Served:
    url: str
    runs: Runs


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path = tmp_path_factory.mktemp("viewer-display") / "agentloop.db"
    runs = fill(path)
    app = ViewerApp(str(path), poll_seconds=0.1)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        yield Served(f"http://127.0.0.1:{listener.getsockname()[1]}", runs)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listener.close()
        app.close()


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
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")  # Selenium Manager must not look for a driver online
        driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


@pytest.fixture(autouse=True)
def leave_the_page(browser: webdriver.Chrome) -> Iterator[None]:
    """After each test, close the page's live stream (the server can then stop at once)."""
    yield
    browser.get("about:blank")


def fact(driver: webdriver.Chrome, name: str) -> str:
    """The value of the run's fact ``name`` (its ``<dd>``)."""
    return str(driver.find_element(By.XPATH, FACT.format(name=name)).text)


FACT = '//dl[@class="facts"]/dt[text()="{name}"]/following-sibling::dd[1]'


def row_cells(driver: webdriver.Chrome, run_id: str) -> list[str]:
    row = driver.find_element(By.CSS_SELECTOR, f'tr.run[data-run="{run_id}"]')
    return [str(cell.text) for cell in row.find_elements(By.TAG_NAME, "td")]


def test_an_unexpected_exception_shows_its_class_message_and_frames(
    browser: webdriver.Chrome, served: Served
) -> None:
    browser.get(f"{served.url}/runs/{served.runs.unexpected}")
    error = browser.find_element(By.ID, "hard-error")
    assert error.find_element(By.CSS_SELECTOR, ".error-class").text == "InternalError"
    message = error.find_element(By.CSS_SELECTOR, ".error-message").text
    assert message == "model client raised KeyError: '[REDACTED]'"
    frames = error.find_elements(By.CSS_SELECTOR, "#traceback li.frame")
    assert 1 <= len(frames) <= 6
    innermost = frames[-1]
    assert innermost.find_element(By.CSS_SELECTOR, ".frame-function").text == "broken_client"
    assert innermost.find_element(By.CSS_SELECTOR, ".frame-file").text.endswith(
        "test_viewer_display.py"
    )
    line = int(innermost.find_element(By.CSS_SELECTOR, ".frame-line").text)
    assert Path(__file__).read_text().splitlines()[line - 1].strip().startswith("return Model")
    code = innermost.find_element(By.CSS_SELECTOR, ".frame-code").text
    assert code == 'return ModelResponse(Message.assistant(settings["[REDACTED]"]))'
    assert FAKE_KEY not in browser.page_source
    assert "where it was raised" in error.text


def test_an_unpriced_run_costs_unknown_never_zero(
    browser: webdriver.Chrome, served: Served
) -> None:
    browser.get(f"{served.url}/runs/{served.runs.unpriced}")
    assert fact(browser, "cost") == "unknown"
    turn_usage = browser.find_element(By.CSS_SELECTOR, ".turn .usage").text
    assert "unknown" in turn_usage and "$" not in turn_usage
    browser.get(f"{served.url}/runs/{served.runs.unexpected}")  # failed before any turn
    assert fact(browser, "cost") == "unknown"
    browser.get(served.url + "/")
    for run_id in (served.runs.unpriced, served.runs.unexpected):
        assert row_cells(browser, run_id)[8] == "unknown"
    assert "$0.0000" not in browser.page_source


def test_a_run_that_failed_after_a_turn_costs_at_least_that_turn(
    browser: webdriver.Chrome, served: Served
) -> None:
    browser.get(f"{served.url}/runs/{served.runs.failed_after_a_turn}")
    assert re.fullmatch(r"≥ \$0\.0\d*[1-9]\d*", fact(browser, "cost"))
    shown = browser.find_element(
        By.XPATH, FACT.format(name="cost") + '/span[@class="cost at-least"]'
    )
    title = shown.get_attribute("title")
    assert title is not None and "may have been billed" in title


def test_a_paused_run_counts_its_waiting_turn_and_calls(
    browser: webdriver.Chrome, served: Served
) -> None:
    browser.get(f"{served.url}/runs/{served.runs.paused}")
    assert fact(browser, "turns") == "1 (1 tool call); turn 0 waits on a decision"
    assert re.fullmatch(r"\$0\.0\d*[1-9]\d*", fact(browser, "cost"))  # the waiting turn's
    browser.get(served.url + "/")
    cells = row_cells(browser, served.runs.paused)
    assert cells[5:7] == ["1", "1"]  # turns, calls
