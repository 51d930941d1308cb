"""The web page in a real browser (issue 46): Debian's Chromium driven by Playwright, against a
real daemon. Typing paints results with the words marked, a result opens its note, and no
script a note holds ever runs; the page logs no error."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import write
from tests.support.web_session import open_web, script_errors

HOSTILE_NAME = "<img src=x onerror=window.pwned=1>.md"
HOSTILE_TEXT = (
    "# rhubarb <script>window.pwned = 2</script>\n\n"
    "rhubarb tart <img src=x onerror=window.pwned=3> [go](javascript:window.pwned=4)\n"
)
BEDS = (
    "---\ntags: [garden]\n---\n# Beds\n\n| bed | crop |\n|-----|------|\n| north | [[plain]] |\n\n"
    "- [x] dig <script>window.pwned = 5</script>\n- [ ] sow [[Nowhere]]\n\n"
    "[[plain#Nowhere|a heading not there]] #seasons ![x](https://example.com/x.png)\n"
)
SCREENSHOTS = os.environ.get("COFFER_SCREENSHOTS")  # a folder: the note page's picture there


@pytest.fixture(scope="module")
def daemon_with_notes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = new_daemon(tmp_path_factory.mktemp("browser"))
    try:
        d.start()
        d.client.post("/api/v1/knowledge_bases", {"name": "garden", "config": {}})
        docs = d.docs("garden")
        write(docs / "plain.md", "# Rhubarb\n\nrhubarb grows in spring, in deep soil\n")
        write(docs / HOSTILE_NAME, HOSTILE_TEXT)
        write(docs / "beds.md", BEDS)
        wait_for(lambda: d.client.get(d.client.kb("garden", "/documents"))["total"] == 3)
        yield d
    finally:
        cleanup(d)


def test_typing_paints_marked_results_and_a_click_opens_the_note(
    daemon_with_notes: Daemon, browser: Any
) -> None:
    url = open_web(daemon_with_notes, kb="garden")["url"]
    page = browser.new_page()
    errors = script_errors(page)
    page.goto(url)
    assert "key=" not in page.url and page.url.endswith("/?kb=garden")
    page.locator("#q").press_sequentially("rhubarb", delay=20)
    page.wait_for_selector("body[data-state=painted]")
    results = page.locator("#results li")
    assert results.count() == 2
    assert {m.lower() for m in page.locator("#results mark").all_inner_texts()} == {"rhubarb"}
    titles = page.locator("#results .title").all_inner_texts()
    assert "Rhubarb" in titles
    assert page.locator("#results img, #results script").count() == 0  # note text is text
    assert page.evaluate("window.pwned") is None

    page.get_by_role("link", name="Rhubarb", exact=True).click()
    page.wait_for_url("**/note/garden/plain.md")
    assert "rhubarb grows in spring" in page.locator(".markdown").inner_text()

    page.go_back()
    page.wait_for_selector("#q")
    page.locator("#q").fill("tart")
    page.wait_for_selector("#results li")
    page.locator("#results a.title").first.click()
    page.wait_for_selector(".markdown")
    assert "<script>window.pwned = 2</script>" in page.locator(".markdown").inner_text()
    assert page.locator("main img, main script").count() == 0
    assert page.evaluate("window.pwned") is None
    assert errors == []
    page.close()


def test_grep_marks_the_pattern_and_a_missing_cookie_shows_no_page(
    daemon_with_notes: Daemon, browser: Any
) -> None:
    url = open_web(daemon_with_notes, kb="garden")["url"]
    context = browser.new_context()
    page = context.new_page()
    page.goto(url)
    page.select_option("#mode", "grep")
    page.locator("#q").fill("deep s.il")
    page.wait_for_selector("body[data-state=painted]")
    assert page.locator("#results mark").all_inner_texts() == ["deep soil"]
    modes = page.locator("#mode option").evaluate_all("(os) => os.map((o) => o.value)")
    assert modes == ["search", "keyword", "grep"]  # the modes the knowledge bases enable
    page.select_option("#mode", "keyword")
    page.locator("#q").fill("rhubarb")
    from playwright.sync_api import expect

    expect(page.locator("#results li")).to_have_count(2)  # not the old query's, in keyword
    expect(page.locator("#said")).to_contain_text("2 passages · keyword")
    other = browser.new_context()  # another profile: the spent key lets nobody in
    refused = other.new_page().goto(url)
    assert refused is not None and refused.status == 403
    other.close()
    context.close()


def test_a_rendered_note_shows_its_table_and_links_and_runs_nothing(
    daemon_with_notes: Daemon, browser: Any
) -> None:
    url = open_web(daemon_with_notes, kb="garden")["url"]
    context = browser.new_context(viewport={"width": 1100, "height": 700})
    page = context.new_page()
    errors = script_errors(page)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(url)
    page.goto(url.split("?", 1)[0] + "note/garden/beds.md")
    assert page.locator(".markdown table td").all_inner_texts() == ["north", "plain"]
    assert page.locator(".markdown input[type=checkbox]").count() == 2
    assert page.locator(".markdown a.broken", has_text="Nowhere").count() == 1
    assert page.locator(".markdown a.missing-heading").count() == 1
    assert page.locator("table.properties a.tag").inner_text() == "#garden"
    assert page.locator(".markdown .remote-image").count() == 1
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / "note.png"))
    page.locator(".markdown td a.note", has_text="plain").click()
    page.wait_for_url("**/note/garden/plain.md")
    assert "rhubarb grows in spring" in page.locator(".markdown").inner_text()
    assert page.locator("aside.beside a", has_text="beds.md").count() == 1  # a backlink
    assert page.evaluate("window.pwned") is None
    assert not [r for r in requests if not r.startswith(url.split("?", 1)[0])], requests
    assert errors == []
    context.close()


LINKED = {
    "hub.md": "# Hub\n\n[[leaf]] and [[other/twig]]\n",
    "leaf.md": "# Leaf\n\nback to [[hub]]\n",
    "other/twig.md": "---\ntags: [wood]\n---\n# Twig\n\nalone otherwise\n",
    "lonely.md": "# Lonely\n\nno links\n",
}


@pytest.fixture(scope="module")
def linked(daemon_with_notes: Daemon) -> str:
    d = daemon_with_notes
    d.client.post("/api/v1/knowledge_bases", {"name": "linked", "config": {}})
    for path, text in LINKED.items():
        write(d.docs("linked") / path, text)
    wait_for(lambda: d.client.get(d.client.kb("linked", "/documents"))["total"] == len(LINKED))
    return "linked"


def test_the_graph_draws_in_webgl_and_a_click_on_a_node_opens_its_note(
    daemon_with_notes: Daemon, linked: str, browser: Any
) -> None:
    url = open_web(daemon_with_notes, kb=linked)["url"]
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    errors = script_errors(page)
    page.goto(url)
    page.get_by_role("link", name="graph").click()
    page.wait_for_selector("body[data-state=drawn]")
    page.wait_for_selector("body[data-layout=done]")
    assert page.evaluate("window.cofferGraph.state.graph.order") == len(LINKED)
    assert page.evaluate("window.cofferGraph.state.graph.size") == 3
    assert page.locator("#graph canvas").count() >= 2  # sigma's WebGL layers and labels
    assert "4 notes and files, 3 links" in page.locator("#said").inner_text()
    sizes = page.evaluate(
        "Object.fromEntries(window.cofferGraph.state.graph.mapNodes((_, a) => [a.path, a.size]))"
    )
    assert sizes["hub.md"] > sizes["other/twig.md"] > sizes["lonely.md"]  # sized by links
    assert "other" in page.locator("#legend").inner_text()  # coloured by top folder
    page.select_option("#colour", "tag")
    assert "wood (1)" in page.locator("#legend").inner_text()
    page.check("#orphans")  # a filter hides the orphan from the renderer
    hidden = "(g) => g.state.renderer.getNodeDisplayData(g.state.graph.findNode("
    hidden += "(_, a) => a.path === 'lonely.md')).hidden"
    assert page.evaluate(f"({hidden})(window.cofferGraph)") is True
    leaf = page.evaluate(
        """() => {
          const { graph, renderer } = window.cofferGraph.state;
          const node = graph.findNode((_, a) => a.path === "leaf.md");
          return renderer.graphToViewport(graph.getNodeAttributes(node));
        }"""
    )
    box = page.locator("#graph").bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + leaf["x"], box["y"] + leaf["y"])
    page.wait_for_url("**/note/linked/leaf.md")
    assert "back to hub" in page.locator(".markdown").inner_text()  # the note, rendered

    page.goto(page.url.split("/note/")[0] + "/graph?kb=linked&note=other/twig.md&depth=1")
    page.wait_for_selector("body[data-state=drawn]")
    paths = page.evaluate("window.cofferGraph.state.answer.nodes.map((n) => n.path)")
    assert paths == ["other/twig.md", "hub.md"]
    page.goto(page.url.split("/graph")[0] + "/graph?kb=garden")  # a hostile file name
    page.wait_for_selector("body[data-state=drawn]")
    assert page.evaluate("window.pwned") is None
    assert errors == []
    page.close()
