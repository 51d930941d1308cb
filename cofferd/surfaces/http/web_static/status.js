// Coffer's status page: polls the API's own GET /api/v1/status about once a second (one
// request at a time, none while the tab is hidden) and reads a knowledge base's skipped
// files, conflicts and broken links, the audit trail and the MCP invocations from the API's
// own routes. Every value is painted as text (textContent, never innerHTML): file names,
// reasons and actors come from synced folders and agents.
"use strict";

(function () {
  const POLL_MS = 1000;
  const ACTIVITY_EVERY = 5; // the audit trail and the calls are read again every 5 polls
  const PAGE = 50;
  const $ = (id) => document.getElementById(id);
  const said = $("said"), kbSelect = $("kb");
  let timer = null;
  let busy = false; // a request of the loop in flight
  let again = false; // asked for while one was: run once more at once
  let ticks = 0;
  let filesOf = null; // what the file lists were read for: reread when it changes
  let wantActivity = true;
  let wantMore = null; // "skipped", "conflicts" or "broken": its next page
  const pages = { skipped: 0, conflicts: 0, broken: 0 }; // items shown of each

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function segment(value) {
    return encodeURIComponent(value);
  }

  function noteLink(kb, relpath, text) {
    const link = el("a", "note", text === undefined ? relpath : text);
    link.href = "/note/" + segment(kb) + "/" + relpath.split("/").map(segment).join("/");
    return link;
  }

  async function getJSON(path, params) {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(params || {})) {
      if (value !== "" && value !== null && value !== undefined) query.set(key, String(value));
    }
    const url = path + (query.toString() ? "?" + query.toString() : "");
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    const answer = await response.json();
    if (!response.ok) {
      const error = answer && answer.error;
      throw new Error(error ? error.message : "HTTP " + response.status);
    }
    return answer;
  }

  // -- figures as cofferctl prints them (coffer_kernel.durations) ----------------------------

  function timeLeft(seconds) {
    if (seconds < 59.5) return seconds.toFixed(0) + " s";
    if (seconds < 3570) return (seconds / 60).toFixed(0) + " min";
    const minutes = Math.round(seconds / 60);
    return Math.floor(minutes / 60) + " h " + String(minutes % 60).padStart(2, "0") + " min";
  }

  function rate(value) {
    const rounded = value ? Number(value.toPrecision(2)) : 0;
    if (rounded >= 10) return Math.round(rounded).toLocaleString("en");
    return rounded ? String(rounded) : "0";
  }

  function count(value) {
    return typeof value === "number" ? value.toLocaleString("en") : value == null ? "-" : value;
  }

  function describe(p) {
    const unit = p.unit ? " " + p.unit : "";
    const percent = p.total ? Math.floor((100 * p.done) / p.total) : 0;
    let text = p.phase + " " + count(p.done) + "/" + count(p.total) + unit;
    text += " (" + percent + "%), " + rate(p.rate_per_s) + "/s";
    if (p.eta_s !== null && p.eta_s !== undefined && p.done < p.total) {
      text += ", " + timeLeft(p.eta_s) + " left";
    }
    return text + ", since " + String(p.started_at).slice(0, 19);
  }

  // -- the status --------------------------------------------------------------------------

  function when(at) {
    return String(at).slice(0, 19).replace("T", " ");
  }

  function row(cells) {
    const tr = el("tr");
    for (const cell of cells) {
      const td = el("td");
      if (cell instanceof Node) td.append(cell);
      else td.textContent = cell === null || cell === undefined ? "-" : String(cell);
      tr.append(td);
    }
    return tr;
  }

  function vectors(v) {
    if (!v) return "-";
    return v.model + (v.embed_pending ? ", " + count(v.embed_pending) + " to embed" : "");
  }

  function paintKbs(status) {
    const body = $("kbs").tBodies[0];
    body.replaceChildren(
      ...status.knowledge_bases.map((k) => {
        const name = el("a", "kb", k.name);
        name.href = "/status?kb=" + segment(k.name);
        const tr = row([name, k.enabled ? k.state : k.state + " (disabled)", count(k.documents),
          count(k.documents_degraded), count(k.skipped || 0), count(k.conflicts || 0),
          vectors(k.vectors)]);
        tr.dataset.kb = k.name;
        tr.dataset.state = k.state;
        return tr;
      })
    );
  }

  function paintPasses(status) {
    const items = [];
    for (const k of status.knowledge_bases) {
      const p = k.progress;
      if (p) {
        const item = el("li", "pass");
        item.dataset.kb = k.name;
        item.append(el("strong", null, k.name + " "));
        const bar = el("progress");
        bar.max = Math.max(p.total || 0, 1);
        bar.value = Math.min(p.done || 0, bar.max);
        item.append(bar, " ", el("span", "figure", describe(p)));
        items.push(item);
      } else if (k.converting) {
        items.push(el("li", "pass", k.name + ": " + count(k.converting) + " files to convert"));
      }
    }
    const w = status.watcher || {};
    if (w.queue_depth) items.push(el("li", null, "changes queued: " + count(w.queue_depth)));
    if (!items.length) items.push(el("li", "quiet", "nothing: every knowledge base is up to date"));
    $("passes").replaceChildren(...items);
  }

  function paintProblems(status) {
    const items = [];
    for (const p of status.problems || []) items.push(el("li", "problem", p));
    for (const r of status.refused_folders || []) {
      items.push(el("li", "problem", "refused folder " + r.name + ": " + r.reason));
    }
    const w = status.watcher || {};
    if (w.healthy === false) items.push(el("li", "problem", "the watcher is not running"));
    if (w.last_error) items.push(el("li", "problem", "watcher: " + w.last_error));
    for (const k of status.knowledge_bases) {
      for (const p of k.problems || []) items.push(el("li", "problem", k.name + ": " + p));
      if (k.settings_error) {
        items.push(el("li", "problem", k.name + ": settings cannot be read: " + k.settings_error));
      }
    }
    if (status.vector_search && status.vector_search !== "available") {
      items.push(el("li", "problem", "vector search: " + status.vector_search));
    }
    if (!items.length) items.push(el("li", "quiet", "none"));
    $("problems").replaceChildren(...items);
  }

  function pool(p) {
    if (!p) return "-";
    let text = count(p.running) + " of " + count(p.size) + " running, " + count(p.busy) + " busy";
    if (p.pids && p.pids.length) text += " (pid " + p.pids.join(", ") + ")";
    return text;
  }

  function paintProcesses(status) {
    const rows = [row(["indexing workers", pool(status.workers)])];
    const c = status.conversions;
    if (c) {
      let text = pool(c.converter) + "; " + count(c.queued) + " queued, " + count(c.converted);
      text += " converted, " + count(c.failed) + " failed";
      if (c.converting) text += "; converting " + c.converting;
      rows.push(row(["converter", text]));
    }
    for (const k of status.knowledge_bases) {
      const v = k.vectors;
      if (!v) continue;
      let text = v.model + " (" + v.provider + "), " + count(v.embed_pending) + " to embed, ";
      text += count(v.embedded_this_run) + " embedded since the start";
      if (v.last_error) text += "; last error: " + v.last_error;
      rows.push(row(["model of " + k.name, text]));
    }
    const web = status.web || {};
    rows.push(row(["daemon", "cofferd " + status.version + ", pid " + status.pid + ", up " +
      Math.round(status.uptime_s) + " s" + (web.address ? ", page at " + web.address : "")]));
    $("processes").tBodies[0].replaceChildren(...rows);
  }

  function paintStatus(status) {
    paintKbs(status);
    paintPasses(status);
    paintProblems(status);
    paintProcesses(status);
    said.textContent = "as of " + new Date().toLocaleTimeString() + " (read every second)";
    document.body.dataset.state = "painted";
  }

  // -- a knowledge base's files ------------------------------------------------------------

  function skippedItem(kb, s) {
    const item = el("li", "skipped");
    item.append(el("code", "path", s.relative_path), " ");
    item.append(el("span", "reason", s.reason + (s.degraded ? " (indexed in a bounded form)" : "")));
    return item;
  }

  function conflictItem(kb, c) {
    const item = el("li", "conflict");
    item.append(el("code", "path", c.relative_path), " ");
    const how = c.kind === "merge_markers" ? "holds git's merge markers" : "a " + c.tool + " copy of";
    item.append(el("span", "reason", how + " "));
    if (c.kind !== "merge_markers") {
      item.append(c.document_id ? noteLink(kb, c.conflicts_with) : el("code", null, c.conflicts_with));
    } else {
      item.append(noteLink(kb, c.relative_path, "open"));
    }
    return item;
  }

  function brokenItem(kb, b) {
    const item = el("li", "broken");
    item.append(noteLink(kb, b.relative_path), el("span", "where", " line " + b.line + ": "));
    item.append(el("code", "target", b.target), " ");
    item.append(el("span", "reason", b.message || b.problem));
    return item;
  }

  const LISTS = {
    skipped: { path: "/skipped", items: (a) => a.items, paint: skippedItem },
    conflicts: { path: "/conflicts", items: (a) => a.conflicts, paint: conflictItem },
    broken: { path: "/links/broken", items: (a) => a.links, paint: brokenItem },
  };

  async function loadList(name, more) {
    const kb = kbSelect.value;
    const list = $(name);
    if (!kb) return;
    const offset = more ? pages[name] : 0;
    const answer = await getJSON("/api/v1/knowledge_bases/" + segment(kb) + LISTS[name].path, {
      limit: PAGE,
      offset: offset,
    });
    const items = LISTS[name].items(answer).map((x) => LISTS[name].paint(kb, x));
    if (more) list.append(...items);
    else list.replaceChildren(...items);
    pages[name] = offset + items.length;
    $(name + "-said").textContent =
      pages[name] < answer.total
        ? "(" + count(pages[name]) + " of " + count(answer.total) + ")"
        : "(" + count(answer.total) + ")";
    $(name + "-more").hidden = pages[name] >= answer.total;
  }

  async function loadFiles() {
    for (const name of Object.keys(LISTS)) await loadList(name, false);
  }

  function filesKey(status) {
    const k = status.knowledge_bases.find((x) => x.name === kbSelect.value);
    if (!k) return kbSelect.value;
    return [k.name, k.documents, k.skipped, k.conflicts, k.state].join("\u0000");
  }

  // -- activity ----------------------------------------------------------------------------

  function auditRow(e) {
    const path = e.details && typeof e.details.path === "string" ? e.details.path : null;
    let doc = e.document_id || "-";
    if (path && e.resource_name) {
      doc = e.event === "kb_document_deleted" ? el("code", null, path) : noteLink(e.resource_name, path);
    }
    const tr = row([when(e.at), e.actor, e.event, e.resource_name || "-", doc]);
    tr.dataset.event = e.event;
    return tr;
  }

  function callRow(c) {
    return row([when(c.at), c.client, c.tool, Number(c.duration_ms).toFixed(0),
      c.outcome]);
  }

  async function loadActivity() {
    const events = await getJSON("/api/v1/audit", {
      kb: $("audit-kb").value,
      event: $("audit-event").value.trim(),
      actor: $("audit-actor").value.trim(),
      limit: PAGE,
    });
    $("audit").tBodies[0].replaceChildren(...events.events.map(auditRow));
    const calls = await getJSON("/api/v1/mcp_invocations", {
      client: $("calls-client").value.trim(),
      tool: $("calls-tool").value.trim(),
      limit: PAGE,
    });
    $("calls").tBodies[0].replaceChildren(...calls.invocations.map(callRow));
  }

  // -- the loop: one request at a time, none while hidden ----------------------------------

  async function tick() {
    busy = true;
    try {
      const status = await getJSON("/api/v1/status");
      paintStatus(status);
      const key = filesKey(status);
      if (key !== filesOf) {
        filesOf = key;
        await loadFiles();
      }
      if (wantMore) {
        const name = wantMore;
        wantMore = null;
        await loadList(name, true);
      }
      if (wantActivity || ticks % ACTIVITY_EVERY === 0) {
        wantActivity = false;
        await loadActivity();
      }
      document.body.dataset.ticks = String(ticks);
    } catch (e) {
      said.textContent = "the daemon does not answer: " + e.message;
    } finally {
      busy = false;
      ticks += 1;
      schedule(again ? 0 : POLL_MS);
      again = false;
    }
  }

  function schedule(delay) {
    if (timer !== null || busy || document.hidden) return;
    timer = setTimeout(() => {
      timer = null;
      if (!document.hidden) tick();
    }, delay);
  }

  function wake() {
    if (busy) {
      again = true;
      return;
    }
    if (timer !== null) clearTimeout(timer);
    timer = null;
    schedule(0);
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) wake();
  });
  kbSelect.addEventListener("change", () => {
    filesOf = null;
    history.replaceState(null, "", "/status?kb=" + segment(kbSelect.value));
    wake();
  });
  for (const name of Object.keys(LISTS)) {
    $(name + "-more").addEventListener("click", () => {
      wantMore = name;
      wake();
    });
  }
  for (const id of ["audit-form", "calls-form"]) {
    $(id).addEventListener("submit", (event) => {
      event.preventDefault();
      wantActivity = true;
      wake();
    });
    $(id).addEventListener("change", () => {
      wantActivity = true;
      wake();
    });
  }
  wake();
})();
