// Coffer's graph page: asks the daemon for a knowledge base's graph (or a note's
// neighbourhood), draws it with sigma.js in WebGL, and lays it out with ForceAtlas2 in a
// worker (graph-layout.js) so the page never waits on it. Titles and paths are drawn as
// text by sigma or set with textContent: a note's name is untrusted.
"use strict";

(function () {
  const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#8cd17d", "#d37295"];
  const OTHER = "#9a9a9a";
  const LAYOUT_ITERATIONS = 400; // then it stops: a still picture, cheap to pan
  const LAYOUT_BUDGET_MS = 20000; // or after this long, whichever comes first
  const LARGE_NODES = 2000, LARGE_EDGES = 10000;
  const $ = (id) => document.getElementById(id);
  const box = $("graph"), said = $("said"), legend = $("legend");
  const kb = box.dataset.kb;
  const params = new URLSearchParams(location.search);
  const state = { graph: null, renderer: null, worker: null, answer: null };

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function say(text) { said.textContent = text; }

  function notePath(path) {
    return "/note/" + encodeURIComponent(kb) + "/" +
      path.split("/").map(encodeURIComponent).join("/");
  }

  function open(node) {
    const path = state.graph.getNodeAttribute(String(node), "path");
    location.assign(notePath(path));
  }

  function topFolder(folder) { return folder ? folder.split("/")[0] : "/"; }

  function groupOf(node) {
    return $("colour").value === "tag" ? (node.tags[0] || "no tag") : topFolder(node.folder);
  }

  // The most frequent groups get a colour each, the rest one grey.
  function colours(nodes) {
    const counts = new Map();
    for (const n of nodes) counts.set(groupOf(n), (counts.get(groupOf(n)) || 0) + 1);
    const ranked = [...counts.entries()].sort((a, b) => b[1] - a[1]);
    const colour = new Map(ranked.slice(0, PALETTE.length).map(([g], i) => [g, PALETTE[i]]));
    legend.replaceChildren(...ranked.slice(0, PALETTE.length + 1).map(([g, count], i) => {
      const item = el("li", "", `${i < PALETTE.length ? g : "others"} (${count})`);
      const swatch = el("span", "swatch");
      swatch.style.background = i < PALETTE.length ? colour.get(g) : OTHER;
      item.prepend(swatch);
      return item;
    }));
    return (node) => colour.get(groupOf(node)) || OTHER;
  }

  function options(select, values) {
    const first = select.firstElementChild;
    select.replaceChildren(first, ...values.map((v) => {
      const option = el("option", "", v);
      option.value = v;
      return option;
    }));
  }

  function fillFilters(nodes) {
    const folders = new Set(), tags = new Set();
    for (const n of nodes) {
      folders.add(topFolder(n.folder));
      for (const t of n.tags) tags.add(t);
    }
    options($("folder"), [...folders].sort());
    options($("tag"), [...tags].sort());
  }

  function hidden(attrs) {
    const folder = $("folder").value, tag = $("tag").value;
    return ($("orphans").checked && attrs.is_orphan) ||
      ($("attachments").checked && attrs.is_attachment) ||
      (folder !== "" && topFolder(attrs.folder) !== folder) ||
      (tag !== "" && !attrs.tags.includes(tag));
  }

  function recolour() {
    const colourOf = colours(state.answer.nodes);
    state.graph.updateEachNodeAttributes((_, attrs) => {
      attrs.color = colourOf(attrs);
      return attrs;
    }, { attributes: ["color"] });
  }

  function build(answer) {
    const graph = new graphology.Graph({ type: "directed", multi: false });
    const colourOf = colours(answer.nodes);
    const count = answer.nodes.length;
    const centre = answer.note;
    answer.nodes.forEach((n, i) => {
      // a cheap first picture: a sunflower spiral, the most linked at its heart
      const r = Math.sqrt(i + 0.5) * 10, angle = i * 2.399963;
      graph.addNode(String(i), {
        ...n, label: n.title, x: r * Math.cos(angle), y: r * Math.sin(angle),
        size: Math.min(3 + 1.6 * Math.sqrt(n.degree), 24) * (n.path === centre ? 1.5 : 1),
        color: colourOf(n), forceLabel: n.path === centre,
      });
    });
    for (const [s, t] of answer.edges) graph.addEdge(String(s), String(t));
    return graph;
  }

  function describe(answer) {
    const what = answer.note ? `around ${answer.note}` : kb;
    let text = `${answer.shown.toLocaleString()} notes and files, ` +
      `${answer.edges_shown.toLocaleString()} links · ${what}`;
    if (answer.truncated) {
      text += ` · the ${answer.shown.toLocaleString()} most linked of ` +
        `${answer.total.toLocaleString()} are shown`;
    }
    if (answer.edges_shown < answer.edges_total) {
      text += ` (${answer.edges_shown.toLocaleString()} of ` +
        `${answer.edges_total.toLocaleString()} links)`;
    }
    say(text);
  }

  function layout(graph) {
    const order = graph.order;
    if (order < 2) { document.body.dataset.layout = "done"; return; }
    const nodes = new Float32Array(order * 10), edges = new Float32Array(graph.size * 3);
    graph.forEachNode((key, a) => {
      const j = Number(key) * 10;
      nodes[j] = a.x; nodes[j + 1] = a.y; nodes[j + 6] = 1 + a.degree; nodes[j + 7] = 1;
      nodes[j + 8] = a.size;
    });
    let j = 0;
    graph.forEachEdge((_, __, s, t) => {
      edges[j] = Number(s) * 10; edges[j + 1] = Number(t) * 10; edges[j + 2] = 1;
      j += 3;
    });
    const big = order > 2000;
    const settings = {
      linLogMode: false, outboundAttractionDistribution: false, adjustSizes: false,
      edgeWeightInfluence: 1, scalingRatio: big ? 10 : 2, strongGravityMode: true,
      gravity: big ? 0.05 : 1, slowDown: 1 + Math.log(order), barnesHutOptimize: order > 500,
      barnesHutTheta: 0.5,
    };
    const worker = new Worker("/static/graph-layout.js");
    state.worker = worker;
    document.body.dataset.layout = "running";
    worker.onmessage = (event) => {
      const { positions, done } = event.data;
      graph.updateEachNodeAttributes((key, a) => {
        const i = Number(key) * 2;
        a.x = positions[i]; a.y = positions[i + 1];
        return a;
      }, { attributes: ["x", "y"] });
      if (done) {
        worker.terminate();
        box.dataset.iterations = event.data.iterations;
        document.body.dataset.layout = "done";
      }
    };
    worker.onerror = (event) => { say(`the layout failed: ${event.message}`); };
    worker.postMessage({ nodes, edges, settings, iterations: LAYOUT_ITERATIONS,
      budgetMs: LAYOUT_BUDGET_MS, batchMs: big ? 500 : 100 },
      [nodes.buffer, edges.buffer]);
  }

  function draw(answer) {
    state.answer = answer;
    const graph = build(answer);
    state.graph = graph;
    fillFilters(answer.nodes);
    describe(answer);
    // A large graph is drawn with sigma's cheapest programs (points and one-pixel lines)
    // and without its edges while the camera is dragged: with software WebGL (SwiftShader)
    // its circles and thick edges cost seconds a frame (docs/benchmarks.md, issue 46).
    const large = graph.order > LARGE_NODES || graph.size > LARGE_EDGES;
    const cheap = large ? {
      nodeProgramClasses: { circle: Sigma.rendering.NodePointProgram },
      edgeProgramClasses: { line: Sigma.rendering.EdgeLineProgram },
      defaultEdgeType: "line", hideEdgesOnMove: true,
    } : {};
    const renderer = new Sigma(graph, box, {
      labelRenderedSizeThreshold: 10,
      defaultEdgeColor: "#b8b8b8",
      nodeReducer: (_, attrs) => (hidden(attrs) ? { ...attrs, hidden: true } : attrs),
      zIndex: false,
      ...cheap,
    });
    box.dataset.programs = large ? "cheap" : "full";
    state.renderer = renderer;
    renderer.on("clickNode", ({ node }) => open(node));
    renderer.on("enterNode", () => { box.style.cursor = "pointer"; });
    renderer.on("leaveNode", () => { box.style.cursor = ""; });
    requestAnimationFrame(() => {
      window.cofferGraph.firstFrame = performance.now();
      document.body.dataset.state = "drawn";
    });
    layout(graph);
  }

  function refresh() { if (state.renderer) state.renderer.refresh(); }

  $("colour").addEventListener("change", () => { if (state.graph) { recolour(); refresh(); } });
  for (const id of ["folder", "tag", "orphans", "attachments"]) {
    $(id).addEventListener("change", refresh);
  }
  $("kb").addEventListener("change", () => {
    location.assign("/graph?kb=" + encodeURIComponent($("kb").value));
  });
  $("graph-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const asked = new URLSearchParams({ kb: $("kb").value });
    if ($("note").value.trim()) {
      asked.set("note", $("note").value.trim());
      asked.set("depth", $("depth").value);
    }
    location.assign("/graph?" + asked);
  });

  window.cofferGraph = { state, open, firstFrame: null };

  if (!kb) { say("no knowledge base to show"); return; }
  let url = `/api/v1/knowledge_bases/${encodeURIComponent(kb)}/graph`;
  if (params.get("note")) {
    url += `?note=${encodeURIComponent(params.get("note"))}&depth=${params.get("depth") || 1}`;
  }
  fetch(url, { credentials: "same-origin" })
    .then((response) => response.json().then((body) => ({ ok: response.ok, body })))
    .then(({ ok, body }) => {
      if (!ok) {
        say(body.error ? body.error.message : "the graph could not be read");
        document.body.dataset.state = "failed";
        return;
      }
      draw(body);
    })
    .catch((error) => { say(`the graph could not be read: ${error}`); });
})();
