// Coffer's search page: searches as you type through the API's own routes, and paints the
// answers with DOM calls only (textContent, never innerHTML: notes are untrusted text).
"use strict";

(function () {
  const TOP_K = 20;
  const MAX_GREP = 100;
  const $ = (id) => document.getElementById(id);
  const form = $("search"), box = $("q"), kbSelect = $("kb"), modeSelect = $("mode");
  const said = $("said"), list = $("results");
  let running = null; // the AbortController of the request in flight
  let asked = 0; // a request's number: only the newest paints
  let last = ""; // the request asked last: the same one again (a blur's change) is not re-run

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function words(value) {
    return value.split(",").map((w) => w.trim()).filter((w) => w.length > 0);
  }

  function filters() {
    const f = {};
    const folder = $("folder").value.trim();
    if (folder) f.folder = folder;
    const tags = words($("tags").value);
    if (tags.length) f.tags = tags;
    const formats = words($("formats").value);
    if (formats.length) f.format = formats;
    if ($("since").value) f.updated_after = $("since").value;
    if ($("until").value) f.updated_before = $("until").value;
    return Object.keys(f).length ? f : null;
  }

  function segment(value) {
    return encodeURIComponent(value);
  }

  function request() {
    const query = box.value.trim();
    const kb = kbSelect.value;
    if (modeSelect.value === "grep") {
      if (!kb) return { error: "grep searches one knowledge base: choose one" };
      return {
        url: "/api/v1/knowledge_bases/" + segment(kb) + "/grep",
        body: { pattern: query, max_matches: MAX_GREP, ignore_case: true },
      };
    }
    const body = { query: query, top_k: TOP_K };
    if (modeSelect.value !== "search") body.mode = modeSelect.value; // else each KB's own
    const f = filters();
    if (f) body.filters = f;
    if (kb) return { url: "/api/v1/knowledge_bases/" + segment(kb) + "/search", body: body };
    return { url: "/api/v1/search", body: body };
  }

  // `text` with the [start, end) spans (in code points, as the API counts) in <mark>
  function marked(text, spans) {
    const out = el("span", "snippet");
    const chars = Array.from(text);
    let at = 0;
    for (const [start, end] of spans || []) {
      if (start < at || end <= start) continue;
      if (start > at) out.append(chars.slice(at, start).join(""));
      out.append(el("mark", null, chars.slice(start, end).join("")));
      at = end;
    }
    if (at < chars.length) out.append(chars.slice(at).join(""));
    return out;
  }

  // grep's answer names lines, not spans: the pattern is matched again here to mark them,
  // when JavaScript reads it as ripgrep does (else the line is shown unmarked)
  function grepSpans(line, pattern) {
    let re;
    try {
      re = new RegExp(pattern, "giu");
    } catch (e) {
      return [];
    }
    const chars = Array.from(line);
    const spans = [];
    let m;
    while ((m = re.exec(line)) !== null && spans.length < 50) {
      if (m[0].length === 0) {
        re.lastIndex += 1;
        continue;
      }
      const start = Array.from(line.slice(0, m.index)).length;
      spans.push([start, start + Array.from(m[0]).length]);
    }
    return chars.length ? spans : [];
  }

  function noteLink(kb, relpath, page) {
    const path = relpath.split("/").map(segment).join("/");
    return "/note/" + segment(kb) + "/" + path + (page ? "#page=" + page : "");
  }

  function result(kb, relpath, title, page, snippet, where) {
    const item = el("li", "result");
    const link = el("a", "title", title || relpath);
    link.href = noteLink(kb, relpath, page);
    item.append(link);
    const place = el("div", "where", kb + " · " + relpath + (page ? " · page " + page : ""));
    if (where) place.append(" · " + where);
    item.append(place);
    item.append(snippet);
    return item;
  }

  function paintPassages(answer) {
    const kb = kbSelect.value;
    const items = answer.passages.map((p) =>
      result(
        p.knowledge_base || kb,
        p.relative_path,
        p.title,
        p.page,
        marked(p.snippet, p.highlights),
        p.heading && p.heading.length ? p.heading.join(" › ") : null
      )
    );
    list.replaceChildren(...items);
    let text = answer.passages.length + " passages · " + answer.mode;
    if (answer.fallback) text += " (" + answer.fallback + ")";
    if (answer.indexing) text += " · still indexing: what it finds may be incomplete";
    if (answer.query_cut) text += " · " + answer.query_cut;
    said.textContent = text;
  }

  function paintHits(answer, pattern) {
    const kb = kbSelect.value;
    const items = answer.hits.map((h) =>
      result(kb, h.relative_path, h.relative_path, h.page, marked(h.line, grepSpans(h.line, pattern)),
        "line " + h.line_number)
    );
    list.replaceChildren(...items);
    said.textContent = answer.hits.length + " lines · grep" + (answer.truncated ? " (more not shown)" : "");
  }

  async function search() {
    const query = box.value.trim();
    const ask = query ? request() : null;
    const same = JSON.stringify(ask);
    if (same === last && document.body.dataset.state !== "error") return;
    last = same;
    if (running) running.abort();
    running = null;
    if (!ask) {
      list.replaceChildren();
      said.textContent = "";
      return;
    }
    if (ask.error) {
      said.textContent = ask.error;
      list.replaceChildren();
      return;
    }
    const controller = new AbortController();
    running = controller;
    const number = ++asked;
    document.body.dataset.state = "searching";
    let answer, response;
    try {
      response = await fetch(ask.url, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(ask.body),
        signal: controller.signal,
        credentials: "same-origin",
      });
      answer = await response.json();
    } catch (e) {
      if (e.name === "AbortError") return;
      said.textContent = "the daemon did not answer: " + e.message;
      document.body.dataset.state = "error";
      return;
    }
    if (number !== asked) return;
    running = null;
    if (!response.ok) {
      const error = answer && answer.error ? answer.error : { message: response.statusText, code: "" };
      said.textContent = error.message + (error.code ? " (" + error.code + ")" : "");
      list.replaceChildren();
      document.body.dataset.state = "error";
      return;
    }
    if (modeSelect.value === "grep") paintHits(answer, query);
    else paintPassages(answer);
    document.body.dataset.state = "painted";
  }

  // every keystroke searches at once: a search takes milliseconds, and the one in flight is
  // aborted (only the newest paints), so typing waits for no timer
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    last = ""; // Enter asks again, whatever was asked before
    search();
  });
  form.addEventListener("input", search);
  form.addEventListener("change", search);
  if (box.value.trim()) search();
})();
