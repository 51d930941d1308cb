"""Issue 46 figures: the web page's graph of a generated KB of 10,000 notes and 50,000 links
(or as many as --notes and --links say: five links a note unless told).

The notes sit in 12 folders (some nested) with one of 20 tags each; the links go from notes
picked at random (one in 37 links nothing) to notes picked by a power law, so a few are
hubs and some notes are orphans. Measured: the graph's JSON answer (warm, median of 5), and
in Chromium the navigation to the graph page until its first frame is drawn (the page's
own mark, a frame after sigma's first render), until the layout worker is done, and the
frames per second while the camera pans over the whole graph for 5 s (sigma's renders
counted, each a full redraw of every node and edge), once during the layout and once
after it. Headless Chromium on this machine draws WebGL with SwiftShader, on the CPU: the
renderer it reports is printed. With --screenshot PATH, the page once laid out, as a PNG.
With `--notes 250000` (far beyond the graph's 10,000 nodes): how long the KB took to
index, the answer's size and whether it says it is cut (shown of total), its time cold
(the first) and warm, the daemon's RSS before and after answering, and the page drawing the
most linked part without freezing (the same frames-per-second figures); --no-browser
leaves the browser out.

Needs Playwright for Python and Debian's Chromium (/usr/bin/chromium).

    nice .venv/bin/python -m bench.studies.web_graph [--screenshot docs/screenshots/graph.png]
    nice .venv/bin/python -m bench.studies.web_graph --notes 250000
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    attach_and_index,
    daemon_memory,
    machine,
    median,
    scratch_home,
    start_daemon,
    stop_daemon,
)
from bench.studies.web_page import trade_key
from cofferctl.client import Client
from tests.support.web_session import CHROMIUM, CHROMIUM_ARGS

NOTES = 10_000
LINKS = 50_000
FOLDERS = ["projects", "projects/coffer", "projects/garden", "people", "journal", "journal/2025",
           "reading", "recipes", "work", "work/meetings", "ideas", "archive"]  # fmt: skip
TAGS = [f"tag{n}" for n in range(20)]
PAN_S = 5.0
COUNT_RENDERS = """() => {
  const g = window.cofferGraph;
  g.renders = 0;
  g.counting = g.counting || g.state.renderer.on("afterRender", () => { g.renders++; });
}"""
GL_RENDERER = """() => {
  const gl = document.createElement("canvas").getContext("webgl");
  const info = gl && gl.getExtension("WEBGL_debug_renderer_info");
  return info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : String(gl);
}"""


def write_kb(root: Path, notes: int = NOTES, links: int = LINKS, seed: int = 46) -> None:
    """`notes` notes and `links` wiki links among them."""
    rng = random.Random(seed)
    names = [f"note-{n:05d}" for n in range(notes)]
    linking = [n for n in range(notes) if n % 37]
    out: list[list[str]] = [[] for _ in range(notes)]
    made = 0
    while made < links:
        source, target = rng.choice(linking), int(notes * rng.random() ** 3)
        if source != target:
            out[source].append(names[target])
            made += 1
    for n, name in enumerate(names):
        folder = root / FOLDERS[rng.randrange(len(FOLDERS))]
        folder.mkdir(parents=True, exist_ok=True)
        tag = TAGS[min(int(rng.paretovariate(1.2)) - 1, len(TAGS) - 1)]
        linked = " ".join(f"[[{t}]]" for t in out[n])
        (folder / f"{name}.md").write_text(f"# Note {n}\n\n#{tag} about {name}.\n\n{linked}\n")


def json_ms(address: str, cookie: str) -> tuple[list[float], int, dict[str, Any]]:
    """Five answers' times (the first cold), the size of one and what it says of itself."""
    host, _, port = address.removeprefix("http://").rstrip("/").partition(":")
    times: list[float] = []
    size, said = 0, {}
    for _ in range(5):
        started = time.perf_counter()
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        conn.request(
            "GET",
            "/api/v1/knowledge_bases/bench/graph",
            headers={"Cookie": cookie, "Host": f"{host}:{port}"},
        )
        response = conn.getresponse()
        body = response.read()
        conn.close()
        times.append((time.perf_counter() - started) * 1000)
        assert response.status == 200, response.status
        size, answer = len(body), json.loads(body)
        said = {k: answer[k] for k in ("truncated", "shown", "total", "edges_shown", "edges_total")}
    return times, size, said


def pan(page: Any, seconds: float) -> dict[str, Any]:
    """Drag the graph around in circles with the mouse for `seconds`: sigma's renders
    counted in the page, and the time between them."""
    box = page.locator("#graph").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    page.evaluate(COUNT_RENDERS)
    page.mouse.down()
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        page.mouse.move(cx + 150 * math.sin(elapsed * 2), cy + 150 * math.cos(elapsed * 2))
    renders = page.evaluate("window.cofferGraph.renders")
    page.mouse.up()
    return {"seconds": elapsed, "renders": renders}


def browser_figures(client: Client, screenshot: Path | None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(client.post("/api/v1/web", {"kb": "bench"})["url"])
        gl = page.evaluate(GL_RENDERER)
        page.goto(page.url.split("/?")[0] + "/graph?kb=bench", wait_until="commit")
        page.wait_for_selector("body[data-state=drawn]", timeout=60_000)
        first = page.evaluate("window.cofferGraph.firstFrame")
        during = pan(page, PAN_S)
        page.wait_for_selector("body[data-layout=done]", timeout=300_000)
        laid_out = page.evaluate("performance.now()")
        after = pan(page, PAN_S)
        iterations = page.get_attribute("#graph", "data-iterations")
        programs = page.get_attribute("#graph", "data-programs")
        said = page.locator("#said").inner_text()
        if screenshot:
            page.evaluate("window.cofferGraph.state.renderer.getCamera().animatedReset()")
            page.wait_for_timeout(600)
            page.screenshot(path=str(screenshot))
        browser.close()
    return {"gl": gl, "first_ms": first, "layout_done_ms": laid_out, "during": during,
            "after": after, "said": said, "iterations": iterations, "programs": programs,
            "errors": errors}  # fmt: skip


def fps(panned: dict[str, Any]) -> str:
    rate = panned["renders"] / panned["seconds"]
    return f"{rate:.1f} frames/s ({panned['renders']} renders in {panned['seconds']:.1f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--screenshot", type=Path, help="save the graph page here (PNG)")
    parser.add_argument("--notes", type=int, default=NOTES, help="notes in the generated KB")
    parser.add_argument("--links", type=int, help="wiki links among them (5 a note)")
    parser.add_argument("--no-browser", action="store_true", help="the JSON answer alone")
    args = parser.parse_args()
    notes, links = args.notes, args.links if args.links is not None else 5 * args.notes
    home = scratch_home("graph")
    run = Path(tempfile.mkdtemp(prefix="cof", dir="/tmp"))
    corpus = home / "kb"
    written = time.perf_counter()
    write_kb(corpus, notes, links)
    written_s = time.perf_counter() - written
    daemon = start_daemon(REPO, home / "home", run / "s.sock")
    client = Client(run / "s.sock", timeout=120)
    try:
        indexed_s = attach_and_index(client, daemon, "bench", corpus, 3600, notes)
        opened = client.post("/api/v1/web", {"kb": "bench"})
        before = daemon_memory(daemon.pid)
        answer_ms, answer_bytes, said = json_ms(opened["address"], trade_key(opened["url"]))
        after = daemon_memory(daemon.pid)
        figures = None if args.no_browser else browser_figures(client, args.screenshot)
        with_page = daemon_memory(daemon.pid)
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)
    print(f"machine: {machine()}")
    print(f"generated KB: {notes:,} notes, {links:,} links (written in {written_s:.0f} s), "
          f"indexed in {indexed_s:.0f} s")  # fmt: skip
    print(f"graph JSON: cold {answer_ms[0]:.0f} ms, warm median {median(answer_ms[1:]):.0f} ms, "
          f"{answer_bytes / 1e6:.2f} MB; says {said}")  # fmt: skip
    print(f"daemon before the graph: {before}; after 5 answers: {after}")
    if figures is None:
        return
    print(f"daemon with the page drawn and panned: {with_page}")
    print(f"WebGL renderer: {figures['gl']}")
    print(f"page says: {figures['said']}")
    print(f"Chromium, navigation to the first frame drawn: {figures['first_ms']:.0f} ms")
    print(f"drawn with sigma's {figures['programs']} programs")
    print(f"layout done ({figures['iterations']} ForceAtlas2 iterations in the worker): "
          f"{figures['layout_done_ms']:.0f} ms after navigation")  # fmt: skip
    print(f"panning during the layout: {fps(figures['during'])}")
    print(f"panning once laid out: {fps(figures['after'])}")
    print(f"console errors: {figures['errors'] or 'none'}")
    kept = {k: figures[k] for k in ("first_ms", "layout_done_ms")}
    print(json.dumps({**kept, "json_ms": answer_ms}, separators=(",", ":")))


if __name__ == "__main__":
    main()
