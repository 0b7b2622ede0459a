"""Deciding in the viewer, in a real browser: the tool runs with the app's deps, and an approval
for a tool the viewer's agent lacks is refused on the page while the run stays paused (SPEC 17).

The browser, the server and the no-foreign-request guard are ``test_viewer_browser``'s (the
module skips with it when chromium is not installed).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from agentloop import Agent, Run, ToolContext, tool
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.ui.viewer import ViewerApp, agent_continuer

_BROWSER_TESTS = Path(__file__).with_name("test_viewer_browser.py")
_spec = importlib.util.spec_from_file_location("_viewer_browser_tests", _BROWSER_TESTS)
assert _spec is not None and _spec.loader is not None
_b = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _b
_spec.loader.exec_module(_b)  # skips this module too when there is no chromium

browser = _b.browser
only_local_requests = _b.only_local_requests
By, WebDriverWait, WAIT = _b.By, _b.WebDriverWait, _b.WAIT


@tool(requires_approval=True)
def charge(ctx: ToolContext[dict[str, str]], order: str) -> str:
    """Charge an order."""
    return f"charged {order} through {ctx.deps['db']}"


def make_deps(run: Run[Any]) -> dict[str, str]:
    """The application's deps factory: what its tools read, per run."""
    return {"db": f"orders-db/{run.session_id}"}


def paused(path: Path) -> tuple[Run[Any], SQLiteStore]:
    store = SQLiteStore(path)
    model = ScriptedModel([call("charge", {"order": "A-7"}, id="call_c1")])
    run = Agent(model, tools=[charge], store=store).session("shop").run_sync("charge A-7")
    assert run.paused
    return run, store


def approve_in_page(driver: Any, url: str, run_id: str) -> None:
    driver.get(f"{url}/runs/{run_id}")
    form = driver.find_element(By.ID, "decisions")
    assert form.find_element(By.CSS_SELECTOR, "input[value='approve']").is_selected()
    form.find_element(By.CSS_SELECTOR, "button[type='submit']").click()


def test_an_approval_in_the_page_runs_the_tool_with_the_apps_deps(
    browser: Any, tmp_path: Path
) -> None:
    path = tmp_path / "agentloop.db"
    run, store = paused(path)
    agent = Agent(ScriptedModel([reply("Charged.")]), tools=[charge], store=store)
    app = ViewerApp(
        str(path),
        allow_decisions=True,
        continuer=agent_continuer(agent),
        deps=make_deps,
        poll_seconds=0.1,
        hosts=["127.0.0.1"],
    )
    try:
        with _b.serving(app) as url:
            approve_in_page(browser, url, run.id)
            WebDriverWait(browser, WAIT).until(
                lambda d: d.find_element(By.ID, "run-status").text == "completed"
            )
            turns = browser.find_element(By.ID, "turns").text
            assert "charged A-7 through orders-db/shop" in turns
    finally:
        store.close()


def test_an_approval_for_a_tool_the_viewers_agent_lacks_is_refused_and_stays_paused(
    browser: Any, tmp_path: Path
) -> None:
    path = tmp_path / "agentloop.db"
    run, store = paused(path)
    bare = Agent(ScriptedModel([reply("Charged.")]), store=store)  # deployed without charge
    app = ViewerApp(
        str(path),
        allow_decisions=True,
        continuer=agent_continuer(bare, deps=make_deps),
        poll_seconds=0.1,
        hosts=["127.0.0.1"],
    )
    try:
        with _b.serving(app) as url:
            approve_in_page(browser, url, run.id)
            refused = WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "refused"))
            assert "would run tool 'charge'" in refused.text
            stored = store.load_run(run.id)
            assert stored is not None and stored.run.paused and stored.run.decisions == []
            browser.get(f"{url}/runs/{run.id}")
            assert browser.find_element(By.ID, "decisions")  # still waiting for a decision
    finally:
        store.close()
