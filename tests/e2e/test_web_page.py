"""The web page in headless Chromium against the real service, graph and agent.

A person's path: enter the API key, search ideas, open a thought (evidence commits, measured results),
list experiences, start a run of a suite task on the emulated K1 with the real Optimizer (offline
generator, real clang + qemu evaluation) and watch it finish with its speedup plot. Screenshots are saved
under the test's tmp dir.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from core.settings import Settings
from knowledge.models import Bootstrap, Run, RunStatus
from knowledge.starter import starter_knowledge
from knowledge.store import GraphStore
from service.api.app import create_app
from tests.integration.conftest import (
    ANALYST_KEY,
    OPERATOR_KEY,
    READER_KEY,
    SEED_RUN,
    api_settings_for,
    build_container,
    free_port,
    seed_api_graph,
    serve_in_thread,
)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
RUN_TIMEOUT_S = 300  # a handful of compile + qemu evaluations
OTHER_RUN = "run-seed-2"
BOOTSTRAP = "boot-seed"


@pytest.fixture(scope="module")
def page_server(
    neo4j_settings: Settings, _session_store: GraphStore, embedder: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    settings = api_settings_for(neo4j_settings, tmp_path_factory.mktemp("web-home"))
    container = build_container(settings, _session_store, embedder)
    seed_api_graph(container)
    container.ingestor.ingest(*starter_knowledge())  # the ideas a fresh install ships, for the agent's directions
    # A second finished run (of a bootstrap) to compare with, and the seeded run's folder as agent/report.py writes it.
    container.store.upsert_nodes(
        [
            Bootstrap(id=BOOTSTRAP, tasks='["sgemv_n"]', targets='["k1-x60"]', budget=2, status=RunStatus.DONE),
            Run(
                id=OTHER_RUN,
                bootstrap_id=BOOTSTRAP,
                task_id="sgemv_n",
                target_key="k1-x60",
                budget=2,
                seed=7,
                status=RunStatus.DONE,
                best_speedup=1.1,
                evaluations=2,
            ),
        ]
    )
    folder = settings.home / "runs" / SEED_RUN
    folder.mkdir(parents=True)
    (folder / "report.md").write_text("# Run run-seed-1: sgemv_n on k1-x60\n")
    (folder / "best.c").write_text("void sgemv_n(void) { /* m4 */ }\n")
    app = create_app(container=container)  # the real agent.optimizer.Optimizer
    port = free_port()
    server, thread = serve_in_thread(app, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    assert shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER), "Debian's chromium and chromium-driver are needed"
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def use_key(driver: WebDriver, base: str, key: str) -> WebDriverWait:
    wait = WebDriverWait(driver, 30)
    driver.get(base + "/")
    driver.find_element(By.ID, "api-key").send_keys(key)
    driver.find_element(By.ID, "save-key").click()
    wait.until(lambda d: d.find_element(By.ID, "key-status").text in ("key accepted", "key not accepted"))
    return wait


def exported(driver: WebDriver, kind: str) -> str:
    """Click an export button; answer the text of the file the link then offers (a blob the page made from
    answerText: the page's CSP keeps even its own blob URLs from being fetched back)."""
    driver.find_element(By.ID, f"export-{kind}").click()
    link = driver.find_element(By.ID, "export-link")
    assert link.get_attribute("href").startswith("blob:") and link.get_attribute("download") == f"eok-answer.{kind}"
    return driver.execute_script("return answerText(arguments[0])", kind)


def page_errors(driver: WebDriver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_search_and_open_a_thought(page_server: str, browser: WebDriver, tmp_path: Path) -> None:
    wait = use_key(browser, page_server, READER_KEY)
    assert browser.find_element(By.ID, "key-status").text == "key accepted"
    wait.until(lambda d: "thoughts" in d.find_element(By.ID, "health").text)  # filled asynchronously
    browser.find_element(By.ID, "tab-search").click()
    Select(browser.find_element(By.ID, "search-target")).select_by_value("k1-x60")
    browser.find_element(By.ID, "search-q").send_keys("LMUL row sweep for gemv")
    browser.find_element(By.ID, "search-go").click()
    hit = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, '#search-results .hit[data-id="t-lmul-gemv"]')))
    assert "measured 1.60×" in hit.text
    # A claim is shown as a claim, after the measured effect, never as a headline chip.
    text = hit.find_element(By.CLASS_NAME, "meta").text
    if "claim" in text:
        assert text.index("measured") < text.index("claim") and "claimed" not in text
    hit.click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "detail-title"), "LMUL=4 row sweep for gemv"))
    evidence = browser.find_element(By.ID, "evidence-table").text
    assert "OpenBLAS" in evidence and "a1a1a1a1a1" in evidence
    effects = browser.find_element(By.ID, "effects-table").text
    assert "k1-x60" in effects and "1.60×" in effects and "k3-x100" in effects
    assert "null" not in browser.find_element(By.ID, "detail-body").text
    browser.save_screenshot(str(tmp_path / "thought.png"))
    assert (tmp_path / "thought.png").stat().st_size > 10_000
    assert page_errors(browser) == []


def test_experiences_list_pages(page_server: str, browser: WebDriver) -> None:
    wait = use_key(browser, page_server, READER_KEY)
    browser.find_element(By.ID, "tab-experiences").click()
    Select(browser.find_element(By.ID, "exp-task")).select_by_value("sgemm_64")
    browser.find_element(By.ID, "exp-go").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#exp-rows tr")) == 25)  # the page size
    assert browser.find_element(By.ID, "exp-more").is_displayed() is False  # 25 of 25: no more pages
    browser.find_element(By.CSS_SELECTOR, "#exp-rows tr:first-child").click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "detail-title"), "gemm attempt 24"))
    detail = browser.find_element(By.ID, "detail-body").text
    assert "timeout" in detail and "null" not in detail and "undefined" not in detail


def test_a_wrong_key_shows_a_clear_message(page_server: str, browser: WebDriver) -> None:
    use_key(browser, page_server, "not-the-right-key")
    banner = browser.find_element(By.ID, "banner")
    assert banner.is_displayed() and "401 unauthorized" in banner.text and "API key is not valid" in banner.text


def test_start_a_run_and_watch_it_finish(page_server: str, browser: WebDriver, tmp_path: Path) -> None:
    wait = use_key(browser, page_server, OPERATOR_KEY)
    browser.find_element(By.ID, "tab-runs").click()
    Select(browser.find_element(By.ID, "run-task")).select_by_value("sscal")
    Select(browser.find_element(By.ID, "run-target")).select_by_value("k1-x60")
    Select(browser.find_element(By.ID, "run-generator")).select_by_value("offline")
    budget = browser.find_element(By.ID, "run-budget")
    budget.clear()
    budget.send_keys("6")
    browser.find_element(By.ID, "run-start").click()
    wait.until(lambda d: d.find_element(By.ID, "run-id").text.startswith("run-"))
    WebDriverWait(browser, RUN_TIMEOUT_S).until(
        lambda d: d.find_element(By.ID, "run-status").text in ("done", "failed", "cancelled", "interrupted")
    )
    assert browser.find_element(By.ID, "run-status").text == "done", browser.find_element(By.ID, "run-log").text
    best = browser.find_element(By.ID, "run-best").text
    assert best.endswith("×") and float(best[:-1]) > 0
    log = browser.find_element(By.ID, "run-log").text
    assert log.splitlines()[0].startswith("started") and log.splitlines()[-1].startswith("finished")
    # The plot drew the best-so-far line: count its blue pixels on the canvas.
    blue = browser.execute_script(
        "const c = document.getElementById('run-plot'); const d = c.getContext('2d')"
        ".getImageData(0, 0, c.width, c.height).data; let n = 0;"
        "for (let i = 0; i < d.length; i += 4) if (d[i] < 60 && d[i + 1] > 90 && d[i + 1] < 130 && d[i + 2] > 220) n++;"
        "return n;"
    )
    assert blue > 100
    wait.until(lambda d: d.find_element(By.ID, "run-id").text in d.find_element(By.ID, "runs-rows").text)
    browser.save_screenshot(str(tmp_path / "run.png"))
    assert (tmp_path / "run.png").stat().st_size > 10_000
    assert page_errors(browser) == []


def test_first_screen_shows_the_graph_runs_and_best_techniques(
    page_server: str, browser: WebDriver, tmp_path: Path
) -> None:
    wait = use_key(browser, page_server, READER_KEY)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#overview-counts .count")) > 3)
    counts = browser.find_element(By.ID, "overview-counts").text
    assert "Thought" in counts and "Experience" in counts
    wait.until(lambda d: SEED_RUN in d.find_element(By.ID, "overview-runs").text)
    techniques = browser.find_element(By.ID, "overview-techniques").text
    # The seeded effect (1.60x over -O3) is pooled with what test_start_a_run_and_watch_it_finish measured
    # before this test on the same graph: the row is there, with both yardsticks.
    assert re.search(r"k1-x60 vector_length (–|\d+\.\d\d×) / \d+\.\d\d×", techniques), techniques
    browser.save_screenshot(str(tmp_path / "overview.png"))
    assert page_errors(browser) == []


def test_controls_follow_the_role(page_server: str, browser: WebDriver) -> None:
    use_key(browser, page_server, READER_KEY)
    assert not browser.find_element(By.ID, "tab-cypher").is_displayed()
    browser.find_element(By.ID, "tab-runs").click()
    assert not browser.find_element(By.ID, "run-form").is_displayed()  # a reader cannot start runs
    use_key(browser, page_server, ANALYST_KEY)
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "tab-cypher").is_displayed())
    browser.find_element(By.ID, "tab-runs").click()
    assert not browser.find_element(By.ID, "run-form").is_displayed()
    use_key(browser, page_server, OPERATOR_KEY)
    browser.find_element(By.ID, "tab-runs").click()
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "run-form").is_displayed())


def test_cypher_console_table_graph_and_saved_query_form(page_server: str, browser: WebDriver, tmp_path: Path) -> None:
    wait = use_key(browser, page_server, ANALYST_KEY)
    wait.until(lambda d: d.find_element(By.ID, "tab-cypher").is_displayed())
    browser.find_element(By.ID, "tab-cypher").click()
    text = browser.find_element(By.ID, "cypher-text")
    text.clear()
    text.send_keys("MATCH p = (t:Thought {id: 't-lmul-gemv'})-[:EVIDENCED_BY]->(c:Commit) RETURN t, c, p")
    browser.find_element(By.ID, "cypher-go").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#cypher-rows tbody tr")) == 1)
    assert "Thought" in browser.find_element(By.ID, "cypher-rows").text
    browser.find_element(By.ID, "view-graph").click()
    graph = browser.find_element(By.ID, "cypher-graph")
    assert graph.is_displayed()
    assert int(graph.get_attribute("data-nodes")) == 2 and int(graph.get_attribute("data-relationships")) >= 1
    assert len(graph.find_elements(By.CSS_SELECTOR, "line.edge")) >= 1
    browser.save_screenshot(str(tmp_path / "cypher-graph.png"))
    # The same guard as the API: a write is refused with its reason.
    text.clear()
    text.send_keys("CREATE (n:Intruder) RETURN n")
    browser.find_element(By.ID, "cypher-go").click()
    wait.until(lambda d: "403 write_refused" in d.find_element(By.ID, "banner").text)
    # A saved query is a form: its parameters are inputs with their defaults.
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#saved-name option")) >= 12)
    Select(browser.find_element(By.ID, "saved-name")).select_by_value("best_thoughts_on_target")
    target = browser.find_element(By.CSS_SELECTOR, '#saved-params input[data-param="target"]')
    assert target.get_attribute("value") == "k1-x60"
    browser.find_element(By.ID, "saved-go").click()
    browser.find_element(By.ID, "view-table").click()
    wait.until(lambda d: "t-lmul-gemv" in d.find_element(By.ID, "cypher-table").text)
    browser.save_screenshot(str(tmp_path / "saved-query.png"))
    # Chromium logs the refused write's HTTP status; nothing else may go wrong on the page.
    assert [e for e in page_errors(browser) if "/cypher" not in e or "403" not in e] == []


def test_a_finished_run_shows_its_best_kernel_and_lineage_with_commit_links(
    page_server: str, browser: WebDriver, tmp_path: Path
) -> None:
    wait = use_key(browser, page_server, READER_KEY)
    wait.until(lambda d: SEED_RUN in d.find_element(By.ID, "overview-runs").text)
    browser.find_element(By.XPATH, f'//tbody[@id="overview-runs"]//code[text()="{SEED_RUN}"]').click()
    wait.until(lambda d: d.find_element(By.ID, "run-outcome").is_displayed())
    assert "exp-3" in browser.find_element(By.ID, "run-outcome-best").text
    lineage = browser.find_element(By.ID, "run-lineage")
    wait.until(lambda d: "exp-3" in lineage.text)
    assert "exp-1" in lineage.text and "LMUL=4 row sweep for gemv" in lineage.text
    links = lineage.find_elements(By.CSS_SELECTOR, "a.commit")
    assert links and links[0].get_attribute("href").endswith("/commit/" + "a1" * 20)
    assert not browser.find_element(By.ID, "run-cancel").is_displayed()  # reader: no cancel button
    browser.save_screenshot(str(tmp_path / "lineage.png"))
    assert page_errors(browser) == []


def test_graph_view_connects_colours_and_inspects_the_answer(
    page_server: str, browser: WebDriver, tmp_path: Path
) -> None:
    wait = use_key(browser, page_server, ANALYST_KEY)
    wait.until(lambda d: d.find_element(By.ID, "tab-cypher").is_displayed())
    browser.find_element(By.ID, "tab-cypher").click()
    # The schema sidebar: labels with counts, relationship types, property keys.
    wait.until(lambda d: "Thought" in d.find_element(By.ID, "schema-labels").text)
    assert "EVIDENCED_BY" in browser.find_element(By.ID, "schema-types").text
    assert "title" in browser.find_element(By.ID, "schema-keys").text.split()
    # Only nodes come back: the view still draws the relationships among them.
    text = browser.find_element(By.ID, "cypher-text")
    text.clear()
    text.send_keys(
        "MATCH (t:Thought {id: 't-lmul-gemv'}), (c:Commit), (i:Idea {id: 'idea-lmul'}) "
        "WHERE c.sha STARTS WITH 'a1a1' RETURN t, c, i"
    )
    browser.find_element(By.ID, "cypher-go").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#cypher-rows tbody tr"))
    browser.find_element(By.ID, "view-graph").click()
    graph = browser.find_element(By.ID, "cypher-graph")
    wait.until(lambda d: int(graph.get_attribute("data-relationships")) >= 2)
    types = {e.get_attribute("data-type") for e in graph.find_elements(By.CSS_SELECTOR, "line.edge")}
    assert {"EVIDENCED_BY", "HAS_THOUGHT"} <= types, types
    # One colour per label, named in the legend; full captions as tooltips, short ones on the canvas.
    legend = browser.find_element(By.ID, "graph-legend").text
    assert "Thought (1)" in legend and "Commit (1)" in legend and "Idea (1)" in legend
    fills = {
        n.get_attribute("data-label"): n.find_element(By.TAG_NAME, "circle").get_attribute("fill")
        for n in graph.find_elements(By.CSS_SELECTOR, "g.node")
    }
    assert len(set(fills.values())) == len(fills) == 3, fills
    thought = graph.find_element(By.CSS_SELECTOR, 'g.node[data-label="Thought"]')
    tip = browser.execute_script("return arguments[0].querySelector('title').textContent", thought)
    assert tip == "Thought: LMUL=4 row sweep for gemv"
    assert thought.find_element(By.TAG_NAME, "text").text.endswith("…")
    # Every node inside the canvas.
    box = graph.rect
    for node in graph.find_elements(By.CSS_SELECTOR, "g.node circle"):
        r = node.rect
        assert box["x"] <= r["x"] and r["x"] + r["width"] <= box["x"] + box["width"], (r, box)
        assert box["y"] <= r["y"] and r["y"] + r["height"] <= box["y"] + box["height"], (r, box)
    # Zoom with the wheel, pan by dragging the background, drag a node; a click inspects it.
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", graph)
    box = graph.rect
    view = browser.find_element(By.ID, "graph-viewport")
    before = view.get_attribute("transform")
    ActionChains(browser).scroll_from_origin(ScrollOrigin.from_element(graph), 0, -200).perform()
    wait.until(lambda d: d.find_element(By.ID, "graph-viewport").get_attribute("transform") != before)
    before = browser.find_element(By.ID, "graph-viewport").get_attribute("transform")
    corner = (8 - box["width"] // 2, 8 - box["height"] // 2)  # the background, away from every node
    ActionChains(browser).move_to_element_with_offset(graph, *corner).click_and_hold().move_by_offset(
        40, 30
    ).release().perform()
    assert browser.find_element(By.ID, "graph-viewport").get_attribute("transform") != before
    thought = graph.find_element(By.CSS_SELECTOR, 'g.node[data-label="Thought"]')
    at = thought.get_attribute("transform")
    ActionChains(browser).click_and_hold(thought).move_by_offset(30, 20).release().perform()
    thought = graph.find_element(By.CSS_SELECTOR, 'g.node[data-label="Thought"]')
    assert thought.get_attribute("transform") != at
    thought.find_element(By.TAG_NAME, "circle").click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "detail-title"), "LMUL=4 row sweep for gemv"))
    props = browser.find_element(By.ID, "node-properties").text
    assert "t-lmul-gemv" in props and "technique" in props
    browser.save_screenshot(str(tmp_path / "graph-view.png"))
    # Export: the answer as JSON and CSV, as the browser would save them.
    saved = exported(browser, "json")
    assert '"t-lmul-gemv"' in saved and '"columns"' in saved
    saved = exported(browser, "csv")
    assert saved.startswith("t,c,i\r\n") and "t-lmul-gemv" in saved
    # The plan of the query, without running it; then profiled: what each operator measured, the busiest marked.
    browser.find_element(By.ID, "cypher-explain").click()
    wait.until(lambda d: "ProduceResults" in d.find_element(By.ID, "cypher-plan").text)
    assert not browser.find_elements(By.CSS_SELECTOR, "#cypher-plan .measure")
    browser.find_element(By.ID, "cypher-profile").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#cypher-plan .measure[data-measure="db_hits"]'))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#cypher-plan .op.slowest")) == 1
    assert browser.find_element(By.ID, "cypher-summary").text.startswith("profiled: 1 rows")
    # A refused query: the error alone, nothing of the previous answer left under it.
    browser.find_element(By.ID, "cypher-go").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#cypher-rows tbody tr"))
    text.clear()
    text.send_keys("CREATE (n:Intruder) RETURN n")
    browser.find_element(By.ID, "cypher-go").click()
    wait.until(lambda d: "403 write_refused" in d.find_element(By.ID, "banner").text)
    assert browser.find_element(By.ID, "cypher-table").text == ""
    assert graph.get_attribute("data-nodes") == "0" and browser.find_element(By.ID, "cypher-summary").text == ""
    # Both queries are in the history (this browser's), newest first, and load back into the editor.
    history = [o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#cypher-history option")][1:]
    assert history[0] == "CREATE (n:Intruder) RETURN n" and history[1].startswith("MATCH (t:Thought")
    Select(browser.find_element(By.ID, "cypher-history")).select_by_index(2)
    assert text.get_attribute("value").startswith("MATCH (t:Thought")
    assert [e for e in page_errors(browser) if "/cypher" not in e or "403" not in e] == []


def test_a_run_has_a_url_parameters_artefacts_diff_and_comparison(
    page_server: str, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(f"{page_server}/#/runs/{SEED_RUN}")  # a link someone shared: the key comes after
    browser.find_element(By.ID, "api-key").send_keys(READER_KEY)
    browser.find_element(By.ID, "save-key").click()
    wait = WebDriverWait(browser, 30)
    wait.until(lambda d: d.find_element(By.ID, "run-id").text == SEED_RUN)
    assert browser.find_element(By.ID, "panel-runs").is_displayed()
    wait.until(lambda d: "seed" in d.find_element(By.ID, "run-params").text)
    params = browser.find_element(By.ID, "run-params").text
    assert "generator offline" in params and "directions 1" in params and "budget 3" in params
    # The run folder's files, fetched with the key.
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#run-artefacts a.artefact"))
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#run-artefacts a.artefact")]
    assert names == ["report.md", "best.c"]
    browser.find_element(By.CSS_SELECTOR, '#run-artefacts a[data-name="report.md"]').click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "artefact-text"), "# Run run-seed-1: sgemv_n on k1-x60"))
    # Per-direction series in the plot; the best kernel against its parent.
    wait.until(lambda d: d.find_element(By.ID, "run-plot").get_attribute("data-directions") == "2")
    wait.until(lambda d: d.find_element(By.ID, "run-diff").is_displayed())
    diff = browser.find_element(By.ID, "run-diff")
    assert "exp-1" in browser.find_element(By.ID, "run-diff-title").text
    assert [s.text for s in diff.find_elements(By.CSS_SELECTOR, ".del")] == ["- /*1*/"]
    assert "m4" in diff.find_element(By.CSS_SELECTOR, ".add").text
    browser.save_screenshot(str(tmp_path / "run-page.png"))
    # Two runs side by side: ticked in the list, then by their own URL.
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'#runs-rows input[value="{OTHER_RUN}"]'))
    browser.find_element(By.CSS_SELECTOR, f'#runs-rows input[value="{SEED_RUN}"]').click()
    browser.find_element(By.CSS_SELECTOR, f'#runs-rows input[value="{OTHER_RUN}"]').click()
    browser.find_element(By.ID, "compare-go").click()
    wait.until(lambda d: d.find_element(By.ID, "compare-view").is_displayed())
    assert browser.current_url.endswith(f"#/compare/{SEED_RUN},{OTHER_RUN}")
    wait.until(lambda d: d.find_element(By.ID, "compare-plot").get_attribute("data-series") == "2")
    rows = {
        r.find_element(By.TAG_NAME, "th").text: [c.text for c in r.find_elements(By.TAG_NAME, "td")]
        for r in browser.find_elements(By.CSS_SELECTOR, "#compare-table tr")
    }
    assert rows["run"] == [SEED_RUN, OTHER_RUN] and rows["seed"] == ["0", "7"]
    assert rows["best: competent / -O3"][0] == "1.20× / 1.80×"
    browser.save_screenshot(str(tmp_path / "compare.png"))
    # The bootstraps are listed with their runs done, each linking to its own address.
    wait.until(lambda d: BOOTSTRAP in d.find_element(By.ID, "bootstraps-rows").text)
    row = browser.find_element(By.CSS_SELECTOR, "#bootstraps-rows tr")
    assert row.find_element(By.TAG_NAME, "a").get_attribute("href").endswith(f"#/bootstraps/{BOOTSTRAP}")
    assert "1/1" in row.text and "done" in row.text
    # A bootstrap has its address too, reached from its run's parameters.
    browser.find_element(By.LINK_TEXT, OTHER_RUN).click()
    in_params = (By.CSS_SELECTOR, f'#run-params a[href$="#/bootstraps/{BOOTSTRAP}"]')
    wait.until(lambda d: d.find_elements(*in_params))
    browser.find_element(*in_params).click()
    wait.until(lambda d: OTHER_RUN in d.find_element(By.ID, "bootstrap-rows").text)
    assert browser.current_url.endswith(f"#/bootstraps/{BOOTSTRAP}")
    assert page_errors(browser) == []
