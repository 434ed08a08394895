"use strict";
// The console's pages. Every figure comes from the API (/v1/...), called
// through the console with the session's cookie; state-changing requests
// carry the session's CSRF token. Text from the API is always inserted as
// text, never as markup; graphs are SVG documents the daemon draws.

const session = { owner: "", csrf: "" };

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

async function api(method, path, body) {
  const init = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") init.headers["X-Weir-CSRF"] = session.csrf;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch("/v1" + path, init);
  const text = await resp.text();
  let data = text;
  if ((resp.headers.get("Content-Type") || "").startsWith("application/json")) {
    try { data = JSON.parse(text); } catch (e) { /* keep the text */ }
  }
  if (resp.status === 401 && data && data.code === "E_SIGN_IN") {
    location.href = "/signin?next=" + encodeURIComponent(location.pathname + location.search);
  }
  return { status: resp.status, ok: resp.ok, data };
}

// fullTime shows a time with its date, to the millisecond, in UTC.
function fullTime(s) {
  if (!s) return "";
  const d = new Date(s);
  if (isNaN(d.getTime()) || d.getUTCFullYear() < 1971) return "";
  return d.toISOString().replace("T", " ").replace("Z", " UTC");
}

function pretty(v) {
  if (v === undefined || v === null) return "";
  return JSON.stringify(v, null, 2);
}

// maxRunID is the longest id the API takes (engine.MaxIDBytes).
const maxRunID = 256;

// terminalPhases are the phases a run ends in (apitypes.Phase.Terminal).
const terminalPhases = new Set(["completed", "cancelled", "failed"]);

function phaseBadge(p) {
  return el("span", { class: "phase phase-" + p, text: p });
}

function runLink(id) {
  return el("a", { href: "/runs/" + encodeURIComponent(id), class: "mono", text: id });
}

function errorBox(res) {
  const d = res.data || {};
  return el("p", { class: "error" }, (d.code ? d.code + ": " : "") + (d.message || res.status));
}

// refusal is what a page says of a refused request: the API's code and
// message as the API wrote them (its messages are written for people).
function refusal(res) {
  const d = res.data;
  if (typeof d === "string") return res.status + ": " + d;
  return ((d && d.code) || res.status) + ": " + ((d && d.message) || "");
}

function grid(pairs) {
  const dl = el("dl", { class: "grid" });
  for (const [k, v, id] of pairs) {
    if (v === null || v === undefined || v === "") continue;
    dl.append(el("dt", { text: k }), el("dd", { id: id || null }, v));
  }
  return dl;
}

function table(id, heads, rows) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, heads.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows));
}

function liveBadge() {
  return el("span", { class: "live", id: "live", text: "live" });
}

function setLive(on, why) {
  const b = document.getElementById("live");
  if (b) {
    b.classList.toggle("on", on);
    b.textContent = on ? "live" : (why || "reconnecting…");
  }
}

const main = () => document.getElementById("main");

// fill replaces what node shows with kids: nodes, strings, and nested
// arrays of them; null and false are left out.
function fill(node, ...kids) {
  node.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false));
}

function show(...nodes) {
  fill(main(), ...nodes);
}

async function drawGraph(into, path) {
  const res = await fetch("/v1" + path, { credentials: "same-origin" });
  if (!res.ok) {
    into.replaceChildren(el("p", { class: "muted", text: "No graph: " + res.status }));
    return;
  }
  const doc = new DOMParser().parseFromString(await res.text(), "image/svg+xml");
  const svg = doc.documentElement;
  if (svg.nodeName !== "svg") return;
  into.replaceChildren(document.importNode(svg, true));
}

function legend() {
  return el("div", { class: "legend" },
    el("span", { class: "visited", text: "visited" }), el("span", { class: "current", text: "current" }),
    el("span", { class: "waiting", text: "waiting" }), el("span", { class: "failed", text: "failed" }),
    el("span", { class: "cancelled", text: "cancelled" }));
}

// ---- Runs ----

async function runsPage() {
  const q = new URLSearchParams(location.search);
  const flow = q.get("flow") || "", phase = q.get("phase") || "", before = q.get("before") || "";
  let text = q.get("q") || "", last = null;
  const limit = q.get("limit") || "50";
  document.title = "Runs · weir";
  const flows = await api("GET", "/flows");
  const flowSel = el("select", { id: "flow-filter", name: "flow" }, el("option", { value: "", text: "all flows" }),
    (flows.ok ? flows.data : []).map((f) => el("option", { value: f.name, text: f.name, selected: f.name === flow })));
  const phaseSel = el("select", { id: "phase-filter", name: "phase" }, el("option", { value: "", text: "all phases" }),
    ["queued", "running", "waiting", "completing", "completed", "cancelled", "failed"].map((p) =>
      el("option", { value: p, text: p, selected: p === phase })));
  const apply = () => {
    const n = new URLSearchParams();
    if (flowSel.value) n.set("flow", flowSel.value);
    if (phaseSel.value) n.set("phase", phaseSel.value);
    if (textBox.value.trim()) n.set("q", textBox.value.trim());
    if (limit !== "50") n.set("limit", limit);
    location.search = n.toString();
  };
  // The text filter narrows the page shown, as it changes, without a
  // reload: a run whose id, flow, request id or parent holds the text
  // (any case). It is kept in the address (q=), so a reload or a page
  // of older runs keeps it.
  const textBox = el("input", { type: "search", id: "text-filter", name: "q", placeholder: "id, flow, request id", value: text, maxlength: String(maxRunID), size: "20", autocomplete: "off" });
  textBox.addEventListener("input", () => {
    text = textBox.value.trim();
    history.replaceState(null, "", "?" + withParam(new URLSearchParams(location.search), "q", text));
    if (last) render(last);
  });
  flowSel.addEventListener("change", apply);
  phaseSel.addEventListener("change", apply);
  // Search by run id or request id: the run's page if the text names one
  // of the person's runs by its id, else by the request id it was started
  // with (GET /v1/runs?request_id=), else the API's answer, said here.
  const search = el("input", { type: "search", id: "run-search", name: "id", placeholder: "run id or request id", maxlength: String(maxRunID), size: "28", autocomplete: "off" });
  const searchAnswer = el("span", { class: "answer", id: "search-answer" });
  const searchForm = el("form", { id: "run-search-form", class: "search", action: "/runs", method: "get" },
    el("label", {}, "Find a run", search), el("button", { type: "submit", text: "Go" }), searchAnswer);
  searchForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    const id = search.value.trim();
    if (id === "") { searchAnswer.textContent = ""; return; }
    searchAnswer.textContent = "";
    const byID = await api("GET", "/runs/" + encodeURIComponent(id));
    if (byID.ok) { location.href = "/runs/" + encodeURIComponent(byID.data.id); return; }
    const byRequest = await api("GET", "/runs?" + new URLSearchParams({ request_id: id }).toString());
    if (byRequest.ok && byRequest.data.length > 0) { location.href = "/runs/" + encodeURIComponent(byRequest.data[0].id); return; }
    // Neither names a run: the run id's answer says why, unless the id
    // was refused as one and the request id's refusal says more.
    const res = byID.status === 404 || byRequest.ok ? byID : byRequest;
    const d = res.data || {};
    searchAnswer.textContent = (res.status === 404 ? "No run " + id : "Run " + id) + (d.code ? " (" + d.code + ")" : "");
  });
  const tbody = el("tbody");
  const count = el("span", { class: "muted", id: "runs-count" });
  const pager = el("p", { id: "pager" });
  show(el("h1", {}, "Runs ", liveBadge()),
    el("div", { class: "filters" }, el("label", {}, "Flow", flowSel), el("label", {}, "Phase", phaseSel),
      el("label", {}, "Text on this page", textBox), count, searchForm),
    el("table", { id: "runs-table" },
      el("thead", {}, el("tr", {}, ["Run", "Flow", "Phase", "Attempt", "Parent", "Created", "Updated"].map((h) => el("th", { text: h })))),
      tbody),
    pager,
    el("p", { class: "hint", text: "Newest first, by creation time; the flow and phase filters apply to every page, the text filter to the page shown." }));

  const matches = (r) => {
    if (text === "") return true;
    const t = text.toLowerCase();
    return [r.id, r.flow, r.request_id, r.parent_run_id].some((f) => (f || "").toLowerCase().includes(t));
  };
  const render = (page) => {
    last = page;
    const rows = page.filter(matches);
    tbody.replaceChildren(...rows.map((r) => el("tr", { "data-run": r.id, "data-phase": r.phase },
      el("td", {}, runLink(r.id)), el("td", {}, el("a", { href: "/flows/" + encodeURIComponent(r.flow), text: r.flow })),
      el("td", {}, phaseBadge(r.phase)), el("td", { class: "num", text: r.attempt }),
      el("td", {}, r.parent_run_id ? runLink(r.parent_run_id) : ""),
      el("td", { text: fullTime(r.created_at) }), el("td", { text: fullTime(r.updated_at) }))));
    count.textContent = (text ? rows.length + " of " + page.length : String(rows.length)) + (page.length === 1 && !text ? " run" : " runs") +
      (flow ? " of flow " + flow : "") + " on this page" + (text ? " hold “" + text + "”" : "");
    pager.replaceChildren();
    if (before) pager.append(el("a", { id: "newest-page", href: "?" + withParam(new URLSearchParams(location.search), "before", ""), text: "← newest" }), " ");
    if (page.length >= Number(limit)) {
      pager.append(el("a", { id: "next-page", href: "?" + withParam(new URLSearchParams(location.search), "before", page[page.length - 1].id), text: "older →" }));
    }
  };
  const params = new URLSearchParams({ limit, order: "created" });
  if (phase) params.set("phase", phase);
  if (flow) params.set("flow", flow);
  if (before) params.set("before", before);
  const es = new EventSource("/v1/runs/stream?" + params.toString());
  es.addEventListener("runs", (e) => { setLive(true); render(JSON.parse(e.data)); });
  es.onerror = () => setLive(false);
}

function withParam(q, k, v) {
  const n = new URLSearchParams(q);
  if (v) n.set(k, v); else n.delete(k);
  return n.toString();
}

// ---- A run ----

async function runPage(id) {
  document.title = id + " · weir";
  const first = await api("GET", "/runs/" + encodeURIComponent(id));
  if (!first.ok) {
    show(el("h1", { id: "not-found", text: first.status === 404 ? "No run " + id : "Run " + id }), errorBox(first));
    return;
  }
  const head = el("div"), waits = el("div", { id: "waits" }), panels = el("div", { id: "panels" });
  const graph = el("div", { class: "graph", id: "graph" });
  const timeline = el("tbody");
  const turns = el("tbody");
  const turnsBox = el("div", { id: "agent-turns", hidden: true }, el("h2", { text: "Agent turns" }),
    el("table", {}, el("thead", {}, el("tr", {}, ["Node", "Turn", "Model", "Stop", "Input tokens", "Output tokens", "Cost", "Tool calls"].map((h) => el("th", { text: h })))), turns));
  const children = el("div", { id: "children" }), lineage = el("div", { id: "lineage" });
  const fork = forkControl(id);
  graph.addEventListener("click", (e) => fork.pick(e.target.closest && e.target.closest("g.node[data-node]")));
  const cancelAnswer = el("span", { class: "answer", id: "cancel-answer" });
  const cancelBtn = el("button", { class: "cancel", id: "cancel", type: "button", text: "Cancel run" });
  cancelBtn.addEventListener("click", async () => {
    cancelBtn.disabled = true;
    const res = await api("POST", "/runs/" + encodeURIComponent(id) + "/cancel");
    cancelAnswer.textContent = res.ok ? "cancel: " + res.data.answer : refusal(res);
    cancelBtn.disabled = false;
  });
  show(el("h1", {}, "Run ", el("span", { class: "mono", text: id }), " ", el("span", { id: "run-phase" }), " ", liveBadge()),
    el("div", { class: "actions" }, cancelBtn, cancelAnswer, fork.open), fork.box,
    el("div", { class: "cols" },
      el("div", {}, head, el("h2", { text: "Open waits" }), waits, panels, turnsBox, children, lineage),
      el("div", {}, el("h2", { text: "Graph" }), legend(), graph)),
    el("h2", { text: "Timeline" }),
    el("p", { class: "hint", text: "Each event's detail can be folded by its field count; the lease and queue events between two others are folded into one row that shows them." }),
    el("table", { id: "timeline" },
      el("thead", {}, el("tr", {}, ["Seq", "At", "Type", "Attempt", "Node", "Detail"].map((h) => el("th", { text: h })))),
      timeline));

  const appendEvent = timelineOf(timeline);
  let lastGraphKey = "";
  const render = (r) => {
    document.getElementById("run-phase").replaceChildren(phaseBadge(r.phase));
    // A run that ended cannot be cancelled: the button goes with its end.
    cancelBtn.hidden = terminalPhases.has(r.phase);
    const p = r.progress || {};
    fill(head, grid([
      ["Flow", el("a", { href: "/flows/" + encodeURIComponent(r.flow), text: r.flow })],
      ["Version", el("span", { class: "mono", text: (r.version || "").slice(0, 12) })],
      ["Owner", r.owner], ["Phase", r.phase, "run-phase-text"], ["Attempt", String(r.attempt)],
      ["Request id", r.request_id],
      ["Parent", r.parent_run_id ? el("span", { id: "parent-run" }, runLink(r.parent_run_id), r.parent_node ? " at node " + r.parent_node : "") : ""],
      ["Created", fullTime(r.created_at)], ["Updated", fullTime(r.updated_at)],
      ["Budget", r.budget ? r.spent + " of " + r.budget + " spent" : String(r.spent) + " spent"],
      ["At node", p.node], ["Nodes done", p.done !== undefined ? p.done + " (" + p.visits + " visits)" : ""],
    ]),
    el("h2", { text: "Input" }), el("pre", { id: "run-input", text: pretty(r.input) || "(none)" }),
    r.output !== undefined ? [el("h2", { text: "Output" }), el("pre", { id: "run-output", text: pretty(r.output) })] : null,
    r.error ? [el("h2", { text: "Error" }), el("p", { class: "error", id: "run-error" }, el("b", { text: r.error.code }), ": " + r.error.message)] : null);
    renderWaits(waits, id, r.waits || []);
    renderPanels(panels, p);
    fork.at(terminalPhases.has(r.phase) ? "" : p.node);
    const key = r.phase + "|" + p.node + "|" + p.visits + "|" + p.done + "|" + r.attempt;
    if (key !== lastGraphKey) {
      lastGraphKey = key;
      drawGraph(graph, "/runs/" + encodeURIComponent(id) + "/graph?format=svg");
    }
  };
  render(first.data);
  drawLineage(lineage, id);

  const live = liveTurns();
  panels.after(live.box);
  const kids = followChildren(children, id);
  followRun(id, !terminalPhases.has(first.data.phase), {
    run: (r) => render(r),
    delta: (d) => live.delta(d),
    end: () => { live.clear(); kids.parentEnded(); },
    event: (ev) => {
      live.event(ev);
      appendEvent(ev);
      fork.event(ev);
      if (ev.type === "fork_made") drawLineage(lineage, id);
      if (ev.type === "agent_turn" && ev.detail) {
        const d = ev.detail;
        turnsBox.hidden = false;
        turns.append(el("tr", { "data-node": ev.node }, el("td", { text: ev.node }), el("td", { class: "num", text: d.turn }),
          el("td", { text: d.model || d.model_tool || "" }), el("td", { text: d.stop_reason || "" }),
          el("td", { class: "num", text: d.input_tokens }), el("td", { class: "num", text: d.output_tokens }),
          el("td", { class: "num", text: d.cost }), el("td", { class: "mono", text: (d.tools || []).join(", ") })));
      }
    },
  });
}

// followRun follows run id's stream to the run's end: on.run gets each
// view of the run, on.event each event once, on.delta each piece of a
// model turn's text (asked only with deltas: a run that has not ended,
// so that a daemon streams a turn's text only while someone looks),
// on.end the end. A stream that breaks is connected again by the
// browser with the last message's id (Last-Event-ID), which resumes both
// the events and the turn's text; one the browser gives up on is opened
// again from the same id, after a pause that grows while the run cannot
// be read, and not at all once the run is gone or the session is.
function followRun(id, deltas, on) {
  let lastID = "", lastSeq = 0, pause = 1000;
  const connect = () => {
    const q = new URLSearchParams();
    if (deltas) q.set("deltas", "1");
    if (lastID) q.set("after", lastID);
    const es = new EventSource("/v1/runs/" + encodeURIComponent(id) + "/stream" + (q.size ? "?" + q.toString() : ""));
    const seen = (e) => { if (e.lastEventId) lastID = e.lastEventId; };
    es.addEventListener("run", (e) => { seen(e); pause = 1000; setLive(true); on.run(JSON.parse(e.data)); });
    es.addEventListener("event", (e) => {
      seen(e);
      const ev = JSON.parse(e.data);
      if (ev.seq <= lastSeq) return; // sent again on a stream opened again from an older id
      lastSeq = ev.seq;
      on.event(ev);
    });
    es.addEventListener("turn_delta", (e) => { seen(e); on.delta(JSON.parse(e.data)); });
    es.addEventListener("end", () => { es.close(); setLive(false, "ended"); on.end(); });
    es.onerror = () => {
      setLive(false);
      if (es.readyState === EventSource.CLOSED) reopen(); // else the browser connects again by itself
    };
  };
  const reopen = () => {
    const wait = pause;
    pause = Math.min(2 * pause, 30000);
    setTimeout(async () => {
      let res;
      try {
        res = await api("GET", "/runs/" + encodeURIComponent(id)); // sends a signed-out page to the sign-in
      } catch (e) {
        reopen(); // the daemon cannot be reached yet
        return;
      }
      if (res.status === 404 || res.status === 401) { setLive(false, res.status === 404 ? "gone" : "signed out"); return; }
      connect();
    }, wait);
  };
  connect();
}

// ---- Fork and lineage ----

// forkControl is a run page's "Fork from here…": a new run from a visit
// of one of the run's nodes (POST /runs/{id}/fork), with a new input
// perhaps, and the page of the new run once it is made. The visits are
// read from the timeline as the engine counts them (each node_completed
// or node_failed ends one visit of its node; the node the run is at is
// in its next visit). A fork that would call at-most-once tools again is
// refused with the API's E_FORK_EFFECTS, naming each, unless allowed.
function forkControl(runID) {
  const ended = new Map(); // node → visits ended, in the order first seen
  let current = "";
  const point = el("select", { id: "fork-point" });
  const input = el("textarea", { id: "fork-input", placeholder: "optional new input as JSON; empty: the run's input" });
  const reason = reasonField("reason (journaled on both runs)");
  reason.id = "fork-reason";
  const allow = el("input", { type: "checkbox", id: "fork-allow-effects" });
  const answer = el("p", { class: "answer", id: "fork-answer" });
  const go = el("button", { type: "button", id: "fork-go", text: "Fork" });
  const box = el("div", { class: "panel fork", id: "fork", hidden: true }, el("h2", { text: "Fork from a node visit" }),
    el("p", { class: "hint", text: "A new run, yours: what this run completed before the visit is copied, never run again; from the visit on it runs anew. This run is not changed." }),
    el("label", { class: "muted", text: "From" }), " ", point, el("label", { class: "muted", text: "New input (JSON)" }), input,
    el("label", { class: "muted", text: "Reason" }), reason,
    el("label", {}, allow, " make at-most-once calls after the visit again"), el("div", { class: "actions" }, go), answer);
  const open = el("button", { type: "button", id: "fork-open", text: "Fork from here…", hidden: true });
  open.addEventListener("click", () => { box.hidden = !box.hidden; });
  const redraw = () => {
    const keep = point.value;
    const points = [];
    for (const [node, n] of ended) for (let v = 1; v <= n; v++) points.push(node + "@" + v);
    if (current) points.push(current + "@" + ((ended.get(current) || 0) + 1));
    point.replaceChildren(...points.map((p) => el("option", { value: p, text: p, selected: p === keep })));
    if (!points.includes(keep) && points.length) point.value = points[points.length - 1];
    open.hidden = points.length === 0;
  };
  go.addEventListener("click", async () => {
    const body = { from: point.value };
    if (input.value.trim() !== "") {
      try { body.input = JSON.parse(input.value); } catch (e) {
        answer.textContent = "The input is not JSON: " + e.message;
        return;
      }
    }
    if (reason.value.trim() !== "") body.reason = reason.value.trim();
    if (allow.checked) body.allow_effects = true;
    go.disabled = true;
    const res = await api("POST", "/runs/" + encodeURIComponent(runID) + "/fork", body);
    go.disabled = false;
    if (res.ok) { location.href = "/runs/" + encodeURIComponent(res.data.run_id); return; }
    answer.textContent = refusal(res);
  });
  return {
    open, box,
    event(ev) {
      if ((ev.type === "node_completed" || ev.type === "node_failed") && ev.node) { ended.set(ev.node, (ended.get(ev.node) || 0) + 1); redraw(); }
    },
    at(node) { if (node !== current) { current = node || ""; redraw(); } },
    // pick opens the form at the latest visit of the graph's node g.
    pick(g) {
      const node = g && g.dataset.node;
      const latest = [...point.options].map((o) => o.value).filter((v) => v.startsWith(node + "@")).pop();
      if (!latest) return;
      point.value = latest;
      box.hidden = false;
    },
  };
}

// drawLineage shows where run id was forked from and the forks made of
// it (GET /runs/{id}/lineage), each a link; nothing for a run with
// neither.
async function drawLineage(into, id) {
  const res = await api("GET", "/runs/" + encodeURIComponent(id) + "/lineage");
  if (!res.ok) { fill(into, el("h2", { text: "Lineage" }), errorBox(res)); return; }
  const self = res.data.find((r) => r.id === id) || {};
  const from = self.forked_from;
  const forks = res.data.filter((r) => r.forked_from && r.forked_from.run_id === id);
  if (!from && forks.length === 0) { into.replaceChildren(); return; }
  const at = (f) => " at " + f.node + "@" + f.visit;
  fill(into, el("h2", { text: "Lineage" }),
    from ? el("p", { id: "forked-from" }, "Forked from ", runLink(from.run_id), at(from)) : null,
    forks.length ? [el("p", { text: "Forks of this run:" }), el("ul", { id: "forks" },
      forks.map((f) => el("li", { "data-run": f.id }, runLink(f.id), at(f.forked_from), " ", phaseBadge(f.phase))))] : null);
}

// childPage bounds the child runs a run's page lists (one page of the
// API's list): a fan-out of more children says how to see them all.
const childPage = 100;

// followChildren lists the runs id's subflows, fan-outs and agents
// started, live, oldest first; nothing is shown for a run without any.
// Once the parent has ended and so have all its children, nothing more
// can change: the stream is closed (a browser holds few connections per
// site, and every open run page holds two).
function followChildren(into, id) {
  const es = new EventSource("/v1/runs/stream?" + new URLSearchParams({ parent: id, limit: String(childPage) }).toString());
  let ended = false, allEnded = false;
  const settle = () => { if (ended && allEnded) es.close(); };
  es.addEventListener("runs", (e) => {
    const kids = JSON.parse(e.data).sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : (a.id < b.id ? -1 : 1)));
    allEnded = kids.every((k) => terminalPhases.has(k.phase));
    settle();
    if (kids.length === 0) { into.replaceChildren(); return; }
    fill(into, el("h2", { text: "Child runs" }),
      table("children-table", ["Run", "Node", "Flow", "Phase", "Created"],
        kids.map((k) => el("tr", { "data-run": k.id, "data-phase": k.phase },
          el("td", {}, runLink(k.id)), el("td", { text: k.parent_node || "" }),
          el("td", {}, el("a", { href: "/flows/" + encodeURIComponent(k.flow), text: k.flow })),
          el("td", {}, phaseBadge(k.phase)), el("td", { text: fullTime(k.created_at) })))),
      kids.length >= childPage ? el("p", { class: "hint", text: "The first " + childPage + " children by run id." }) : null);
  });
  return { parentEnded: () => { ended = true; settle(); } };
}

// ---- The timeline ----

// noiseTypes are the events that say where a task is in the queue and who
// holds its lease (runtime/engine/events.go): a run's page folds each run
// of them into one row, so that what the run did reads first. A task
// dropped from the queue is not among them: it ends its node.
const noiseTypes = new Set(["queued", "leased", "renewed", "expired", "drained", "withheld"]);

// Bounds of an event's detail as shown: the detail comes from the run's
// tools and models, so what a page draws of it is bounded here, and a cut
// value can be shown whole on request.
const maxShownChars = 160, maxShownFields = 40, maxShownDepth = 4;

// cutText shows s, cut at maxShownChars with a button that shows it whole.
function cutText(s, cls) {
  if (s.length <= maxShownChars) return el("span", { class: cls, text: s });
  const span = el("span", { class: cls + " cut", text: s.slice(0, maxShownChars) + "…" });
  const more = el("button", { type: "button", class: "more", text: "show all " + s.length + " characters" });
  more.addEventListener("click", () => { span.textContent = s; span.classList.remove("cut"); more.remove(); });
  return el("span", {}, span, " ", more);
}

// fieldValue draws one value of an event's detail: text as text, numbers
// and booleans as they are, a list of scalars on one line, an object or a
// list of objects as nested fields; past maxShownDepth, as JSON.
function fieldValue(v, depth) {
  if (v === null || v === undefined) return el("span", { class: "muted", text: "none" });
  if (v === "") return el("span", { class: "muted", text: "(empty)" });
  if (typeof v === "string") return cutText(v, "str");
  if (typeof v !== "object") return el("span", { class: "mono", text: String(v) });
  if (depth >= maxShownDepth) return cutText(JSON.stringify(v), "mono");
  if (Array.isArray(v)) {
    if (v.length === 0) return el("span", { class: "muted", text: "(empty list)" });
    if (v.every((x) => x === null || typeof x !== "object")) return cutText(v.map((x) => String(x)).join(", "), "mono");
    return el("ol", { class: "fields-list", start: "0" }, v.slice(0, maxShownFields).map((x) => el("li", {}, fieldValue(x, depth + 1))),
      v.length > maxShownFields ? el("li", { class: "muted", text: "… " + (v.length - maxShownFields) + " more" }) : null);
  }
  return fields(v, depth + 1);
}

// fields draws an object as key: value rows, its keys sorted; past
// maxShownFields the rest are behind a button.
function fields(obj, depth) {
  const keys = Object.keys(obj).sort();
  const dl = el("dl", { class: "fields" });
  const add = (ks) => { for (const k of ks) dl.append(el("dt", { text: k }), el("dd", { "data-field": k }, fieldValue(obj[k], depth))); };
  add(keys.slice(0, maxShownFields));
  if (keys.length > maxShownFields) {
    const more = el("button", { type: "button", class: "more", text: "show " + (keys.length - maxShownFields) + " more fields" });
    more.addEventListener("click", () => { more.remove(); add(keys.slice(maxShownFields)); });
    dl.append(more);
  }
  return dl;
}

// eventDetail draws an event's detail as fields, open and collapsible.
function eventDetail(d) {
  if (d === null || d === undefined) return "";
  if (typeof d !== "object" || Array.isArray(d)) return fieldValue(d, 0);
  const n = Object.keys(d).length;
  if (n === 0) return "";
  return el("details", { class: "ev-detail", open: true },
    el("summary", { text: n + (n === 1 ? " field" : " fields") }), fields(d, 0));
}

function eventRow(ev) {
  return el("tr", { "data-type": ev.type, "data-seq": ev.seq },
    el("td", { class: "num", text: ev.seq }), el("td", { class: "mono", text: fullTime(ev.at) }),
    el("td", { text: ev.type }), el("td", { class: "num", text: ev.attempt || "" }), el("td", { text: ev.node || "" }),
    el("td", {}, eventDetail(ev.detail)));
}

// timelineOf appends events to tbody as they come, folding each run of
// consecutive lease and queue events into one row that shows them.
function timelineOf(tbody) {
  let group = null; // the fold the last event went into, while the last event is noise
  const label = (g) => {
    const counts = new Map();
    for (const t of g.types) counts.set(t, (counts.get(t) || 0) + 1);
    const kinds = [...counts].map(([t, n]) => (n > 1 ? t + " ×" + n : t)).join(", ");
    g.button.textContent = (g.open ? "▾ " : "▸ ") + g.rows.length + (g.rows.length === 1 ? " lease/queue event" : " lease/queue events") + " (" + kinds + ")";
    g.button.setAttribute("aria-expanded", String(g.open));
  };
  return (ev) => {
    const row = eventRow(ev);
    if (!noiseTypes.has(ev.type)) {
      group = null;
      tbody.append(row);
      return;
    }
    if (group === null) {
      const button = el("button", { type: "button", class: "fold" });
      const g = { button, rows: [], types: [], open: false, head: el("tr", { class: "noise-group" }, el("td", { colspan: "6" }, button)) };
      button.addEventListener("click", () => {
        g.open = !g.open;
        for (const r of g.rows) r.hidden = !g.open;
        label(g);
      });
      tbody.append(g.head);
      group = g;
    }
    row.classList.add("noise");
    row.hidden = !group.open;
    group.rows.push(row);
    group.types.push(ev.type);
    tbody.append(row);
    label(group);
  };
}

function renderWaits(into, runID, waits) {
  if (waits.length === 0) {
    into.replaceChildren(el("p", { class: "muted", id: "no-waits", text: "None." }));
    return;
  }
  // Keep what a person is typing: a panel is replaced only when its wait
  // changes, and the panels are not moved at all while the waits are the
  // same (moving a panel takes the focus from the field being typed in).
  const now = [...into.children].map((c) => (c.classList.contains("wait") ? c.dataset.wait : ""));
  if (now.length === waits.length && waits.every((w, i) => now[i] === w.id)) return;
  const keep = new Map([...into.querySelectorAll(".wait")].map((w) => [w.dataset.wait, w]));
  into.replaceChildren(...waits.map((w) => keep.get(w.id) || waitPanel(runID, w)));
}

function waitPanel(runID, w) {
  const panel = el("div", { class: "panel wait", "data-wait": w.id, "data-kind": w.kind });
  panel.append(el("div", {}, el("b", { text: w.kind }), " wait ", el("span", { class: "mono", text: w.id }), " at node ", el("b", { text: w.node })),
    el("div", { class: "muted", text: [fullTime(w.since) ? "since " + fullTime(w.since) : "",
      fullTime(w.until) && new Date(w.until).getUTCFullYear() < 2100 ? "until " + fullTime(w.until) : ""].filter(Boolean).join(" · ") }),
    waitShown(w) || "", el("div", { class: "controls" }, waitControls(w.run_id || runID, w)));
  return panel;
}

// waitShown draws what a wait shows the person who ends it.
function waitShown(w) {
  const s = w.shown;
  if (s === null || s === undefined || s === "null") return null;
  if (w.kind === "approval") {
    return el("div", { class: "proposal" }, el("p", {}, "The agent proposes to call ", el("b", { class: "mono", text: s.tool }),
      s.turn ? " (turn " + s.turn + ")" : "", " with:"), el("pre", { class: "shown", text: pretty(s.arguments) }),
      s.digest ? el("p", { class: "muted" }, "Digest ", el("span", { class: "mono digest", text: s.digest })) : "");
  }
  if (w.kind === "child" && s.child) return el("p", {}, "Waits for child run ", runLink(s.child));
  if (w.kind === "unknown") {
    return el("div", {}, el("p", {}, "The call to ", el("b", { class: "mono", text: s.tool }),
      fullTime(s.started_at) ? " (started " + fullTime(s.started_at) + ")" : "",
      " ended without an answer, and its probe could not tell whether it had its effect. Look where the effect would be, then say. Its arguments:"),
    el("pre", { class: "shown", text: pretty(s.arguments) }), el("p", { class: "muted" }, "Idempotency key ", el("span", { class: "mono", text: s.key })));
  }
  if (w.kind === "runaway") {
    const what = s.why === "errors"
      ? [s.count + " calls in a row failed with ", el("b", { text: s.error_code || "" }), " (error_limit " + s.limit + "), the last to "]
      : ["The same call answered the same way " + s.count + " times (repeat_limit " + s.limit + ") to "];
    return el("div", {}, el("p", {}, ...what, el("b", { class: "mono", text: s.tool || "" }),
      ", in turns " + s.first_turn + " to " + s.last_turn + "; " + s.input_tokens_since + " input and " + s.output_tokens_since + " output tokens since. Its arguments:"),
    el("pre", { class: "shown", text: pretty(s.arguments) }),
    el("p", { class: "muted", text: "Approve resumes the agent (a payload {\"note\": \"...\"} is sent to the model); reject ends the node with E_AGENT_RUNAWAY." }));
  }
  if (w.kind === "budget") {
    return el("p", {}, "The run's budget of " + s.budget + " cannot cover its next call, " + (s.next || "") + ": it spent " + s.spent +
      ", the call needs " + s.needed + " (" + s.short + " more than is left). Raise the budget to let it go on.");
  }
  if (w.kind === "exhausted") {
    const e = s.error || {};
    return el("p", {}, "Task ", el("span", { class: "mono", text: s.task }), " of ", el("b", { class: "mono", text: s.tool || "" }),
      " failed all " + s.tries + " tries", e.code ? [": ", el("b", { text: e.code }), " " + (e.message || "")] : "",
      ". Fix the cause, then redrive it: its tries count afresh, with the same idempotency key.");
  }
  return el("pre", { class: "shown", text: pretty(s) });
}

// waitControls are the buttons that end a wait of a kind a person ends.
function waitControls(runID, w) {
  if (w.kind === "human" || w.kind === "approval" || w.kind === "runaway") return decideControls(runID, w);
  if (w.kind === "unknown") return resolveControls(runID, w);
  if (w.kind === "exhausted") return redriveControls(w);
  if (w.kind === "budget") return budgetControls(runID, w);
  return null;
}

// An agent's approval names the digest of the proposal the page shows,
// so that it is refused (E_STALE_DECISION) if the wait shows another by
// then. Its arguments are shown for editing: changed, the approval is an
// edit (the call runs with them); Respond answers the call in the tool's
// place with the result given, and the tool never runs.
function decideControls(runID, w) {
  const approval = w.kind === "approval";
  const proposed = approval && w.shown ? pretty(w.shown.arguments) : "";
  const payload = el("textarea", { class: "payload", placeholder: w.kind === "runaway"
    ? "optional note for the model, e.g. {\"note\": \"that key will not change\"}" : "optional JSON payload, e.g. {\"ok\": true}" });
  const args = el("textarea", { class: "arguments" });
  args.value = proposed;
  const result = el("textarea", { class: "result", placeholder: "the call's result as JSON, e.g. {\"sent\": true}" });
  const reason = el("input", { type: "text", class: "reason", placeholder: "reason (for a rejection)" });
  const answer = el("span", { class: "answer decision-answer" });
  const parsed = (field, what) => {
    try { return { ok: true, v: JSON.parse(field.value) }; } catch (e) {
      answer.textContent = what + " is not JSON: " + e.message;
      return { ok: false };
    }
  };
  const decide = async (verb) => {
    const body = {};
    if (approval && w.shown && w.shown.digest) body.digest = w.shown.digest;
    if (!approval && verb === "approve" && payload.value.trim() !== "") {
      const p = parsed(payload, "The payload");
      if (!p.ok) return;
      body.payload = p.v;
    }
    if (approval && verb === "approve" && args.value.trim() !== proposed.trim()) {
      const p = parsed(args, "The edited arguments");
      if (!p.ok) return;
      body.payload = p.v;
    }
    if (verb === "respond") {
      const p = parsed(result, "The result");
      if (!p.ok) return;
      body.result = p.v;
      verb = "approve";
    }
    if (verb === "reject" && reason.value.trim() !== "") body.reason = reason.value.trim();
    const res = await api("POST", "/runs/" + encodeURIComponent(runID) + "/waits/" + encodeURIComponent(w.id) + "/" + verb, body);
    answer.textContent = res.ok ? res.data.decision : refusal(res);
  };
  const fields = approval
    ? [el("label", { class: "muted", text: "Arguments (approve runs the call with them; change them to edit it)" }), args,
      el("label", { class: "muted", text: "Result (respond: answers the call in the tool's place; the tool never runs)" }), result]
    : [el("label", { class: "muted", text: "Payload (approve)" }), payload];
  return [...fields,
    el("label", { class: "muted", text: "Reason (reject)" }), reason,
    el("div", { class: "actions" },
      el("button", { class: "approve", type: "button", text: "Approve", onclick: () => decide("approve") }),
      ...(approval ? [el("button", { class: "respond", type: "button", text: "Respond", onclick: () => decide("respond") })] : []),
      el("button", { class: "reject", type: "button", text: "Reject", onclick: () => decide("reject") }), answer)];
}

// budgetControls raise the run's budget (POST /runs/{id}/budget, owner-only):
// the agent parked on the budget wait reserves its next call again.
function budgetControls(runID, w) {
  const add = el("input", { type: "number", class: "add", min: "1", step: "1", placeholder: "how much more" });
  if (w.shown && w.shown.short) add.value = String(w.shown.short);
  const reason = reasonField("reason (journaled)");
  const answer = el("span", { class: "answer budget-answer" });
  const raise = async () => {
    const n = Number(add.value);
    if (!Number.isInteger(n) || n <= 0) { answer.textContent = "Add a positive integer."; return; }
    const body = { add: n };
    if (reason.value.trim() !== "") body.reason = reason.value.trim();
    const res = await api("POST", "/runs/" + encodeURIComponent(runID) + "/budget", body);
    answer.textContent = res.ok ? "budget " + res.data.before + " → " + res.data.budget : refusal(res);
  };
  return [el("label", { class: "muted", text: "Add to the run's budget" }), add, reason,
    el("div", { class: "actions" }, el("button", { class: "raise", type: "button", text: "Raise budget", onclick: raise }), answer)];
}

// maxReason is the longest reason an operation takes
// (engine.MaxReasonBytes).
const maxReason = 1024;

function reasonField(placeholder) {
  return el("input", { type: "text", class: "reason", placeholder, maxlength: String(maxReason) });
}

// unknownOf says whose call an unknown wait settles, from its id
// (docs/design.md): NODE@VISIT.unknown.N a task's, NODE@VISIT.ITEM.unknown.N
// a fan-out item's, NODE@VISIT.TURN.CALL.unknown.N an agent's call.
function unknownOf(id) {
  const at = id.indexOf("@"), cut = id.lastIndexOf(".unknown.");
  const parts = at < 0 || cut < at ? 0 : id.slice(at, cut).split(".").length - 1;
  if (parts === 1) return { happened: "the item ends with this result", again: "the item's call is made once more" };
  if (parts === 2) return { happened: "the model is given this result", again: "the agent's call is made once more" };
  return { happened: "the node goes on along its ok wire with this result", again: "the call is made once more" };
}

// resolveControls settle an unknown outcome (POST .../resolve):
// "Happened…" asks for the call's result, checked as JSON here, which
// ends the call (a task's node goes on along its ok wire, a fan-out item
// ends, an agent's model is given it); "Did not happen", confirmed, makes
// the call once more. The API's refusal is shown as it says it.
function resolveControls(runID, w) {
  const what = unknownOf(w.id);
  const reason = reasonField("reason (journaled with your name)");
  const result = el("textarea", { class: "result", placeholder: "the call's result as JSON, e.g. {\"id\": \"msg-42\"}; empty: null" });
  const answer = el("span", { class: "answer resolve-answer" });
  const send = async (happened) => {
    const body = { happened };
    if (happened && result.value.trim() !== "") {
      try { body.result = JSON.parse(result.value); } catch (e) {
        answer.textContent = "The result is not JSON: " + e.message;
        return;
      }
    }
    if (!happened && !window.confirm("The call to " + ((w.shown && w.shown.tool) || "the tool") + " did not happen? " + what.again[0].toUpperCase() + what.again.slice(1) + ".")) return;
    if (reason.value.trim() !== "") body.reason = reason.value.trim();
    const res = await api("POST", "/runs/" + encodeURIComponent(runID) + "/waits/" + encodeURIComponent(w.id) + "/resolve", body);
    answer.textContent = !res.ok ? refusal(res) : happened ? "resolved: it happened; " + what.happened : "resolved: it did not happen; " + what.again;
  };
  const happenedForm = el("div", { class: "happened-form", hidden: true }, el("label", { class: "muted", text: "The call's result (JSON): " + what.happened }), result,
    el("div", { class: "actions" }, el("button", { class: "approve confirm-happened", type: "button", text: "Resolve: it happened", onclick: () => send(true) })));
  return [el("label", { class: "muted", text: "Reason" }), reason, happenedForm,
    el("div", { class: "actions" },
      el("button", { class: "approve happened", type: "button", text: "Happened…", onclick: () => { happenedForm.hidden = false; result.focus(); } }),
      el("button", { class: "reject not-happened", type: "button", text: "Did not happen", onclick: () => send(false) }), answer)];
}

// redriveControls send an exhausted wait's dead letter back to the queue,
// as the dead-letter page's buttons do (POST /deadletters/redrive).
function redriveControls(w) {
  const task = w.shown && w.shown.task;
  if (!task) return null;
  const reason = reasonField("reason (journaled with your name)");
  const answer = el("span", { class: "answer redrive-answer" });
  const redrive = async () => {
    if (!window.confirm("Redrive task " + task + "? It goes back to the queue with its tries counted afresh; the run resumes at the node.")) return;
    const res = await api("POST", "/deadletters/redrive", { task_ids: [task], reason: reason.value.trim() || "redriven from the console" });
    const r = res.ok ? (res.data.results || [])[0] : null;
    answer.textContent = !res.ok ? refusal(res) : r && r.redriven ? "redriven" : r && r.error ? r.error.code + ": " + r.error.message : "not redriven";
  };
  return [el("label", { class: "muted", text: "Reason" }), reason,
    el("div", { class: "actions" }, el("button", { class: "redrive", type: "button", text: "Redrive", onclick: redrive }), answer)];
}

function renderPanels(into, p) {
  const out = [];
  if (p.cohorts && p.cohorts.length) {
    out.push(el("h2", { text: "Fan-outs" }), table("cohorts",
      ["Node", "Visit", "State", "Items", "Admitted", "In flight", "Mature / needed", "Failed", "Stopped", "Late", "Cutoff", "Sufficient"],
      p.cohorts.map((c) => el("tr", { "data-node": c.node },
        el("td", { text: c.node }), el("td", { class: "num", text: c.visit }), el("td", { text: c.state }),
        el("td", { class: "num", text: c.items }), el("td", { class: "num", text: c.admitted }), el("td", { class: "num", text: c.in_flight }),
        el("td", { class: "num", text: c.mature + " / " + c.need }), el("td", { class: "num", text: c.failed }),
        el("td", { class: "num", text: c.stopped }), el("td", { class: "num", text: c.late }),
        el("td", { text: fullTime(c.cutoff) }), el("td", { text: c.sufficient === undefined ? "" : (c.sufficient ? "yes" : "no") })))));
  }
  if (p.agents && p.agents.length) {
    out.push(el("h2", { text: "Agents" }), table("agents", ["Node", "Visit", "Turns", "Input tokens", "Output tokens", "Cost"],
      p.agents.map((a) => el("tr", { "data-node": a.node },
        el("td", { text: a.node }), el("td", { class: "num", text: a.visit }), el("td", { class: "num", text: a.turns }),
        el("td", { class: "num", text: a.input_tokens }), el("td", { class: "num", text: a.output_tokens }), el("td", { class: "num", text: a.cost })))),
    el("p", { class: "hint", text: "Totals of each agent's latest visit; its turns are listed below." }));
  }
  const tools = [].concat(p.tool ? [p.tool] : [], p.items || []);
  if (tools.length) {
    out.push(el("h2", { text: "Tool progress" }), table("tools", ["Node", "Item", "Tool", "Done", "Total"],
      tools.map((t) => el("tr", {}, el("td", { text: t.node }), el("td", { text: t.item === undefined ? "" : t.item }),
        el("td", { text: t.tool }), el("td", { class: "num", text: t.done }), el("td", { class: "num", text: t.total })))));
  }
  fill(into, out);
}

// ---- Flows ----

async function flowsPage() {
  document.title = "Flows · weir";
  // A page of flows by name (the API's page size); the description is the
  // doc's summary line, the flow's own page shows it whole.
  const pageSize = 100;
  const after = new URLSearchParams(location.search).get("after") || "";
  const res = await api("GET", "/flows?limit=" + pageSize + (after ? "&after=" + encodeURIComponent(after) : ""));
  if (!res.ok) { show(el("h1", { text: "Flows" }), errorBox(res)); return; }
  const more = res.data.length === pageSize ?
    el("p", {}, el("a", { id: "flows-more", href: "/flows?after=" + encodeURIComponent(res.data[res.data.length - 1].name), text: "More flows" })) : null;
  show(el("h1", { text: "Flows" }), table("flows-table", ["Flow", "Version", "Nodes", "Description"],
    res.data.map((f) => el("tr", { "data-flow": f.name },
      el("td", {}, el("a", { href: "/flows/" + encodeURIComponent(f.name), text: f.name })),
      el("td", { class: "mono", text: f.hash.slice(0, 12) }), el("td", { class: "num", text: f.nodes }), el("td", { text: f.doc || "" })))), more);
}

async function flowPage(name) {
  document.title = name + " · weir";
  const at = new URLSearchParams(location.search).get("version");
  const base = "/flows/" + encodeURIComponent(name);
  const path = at ? base + "/versions/" + encodeURIComponent(at) : base;
  const [res, vres] = await Promise.all([api("GET", path), api("GET", base + "/versions")]);
  if (!res.ok) { show(el("h1", { id: "not-found", text: "No flow " + name + (at ? " at version " + at : "") }), errorBox(res)); return; }
  const f = res.data;
  const versions = vres.ok ? vres.data : [];
  const latest = versions.length > 0 && versions[0].hash === f.hash;
  const graph = el("div", { class: "graph", id: "graph" });
  const link = (v) => base + (v === versions[0] ? "" : "?version=" + encodeURIComponent(v.hash));
  show(el("h1", {}, "Flow ", el("span", { class: "mono", text: f.name })),
    grid([["Description", f.doc], ["Version", "#" + f.version + (latest ? " (latest)" : " (not the latest)"), "flow-version"],
      ["Hash", el("span", { class: "mono", text: f.hash })], ["Registered", fullTime(f.registered_at)], ["Owner", f.owner],
      ["Nodes", String(f.nodes)], ["Runs", el("a", { href: "/runs?flow=" + encodeURIComponent(f.name), text: "this flow's runs" })]]),
    el("h2", { text: "Versions" }),
    vres.ok ? table("versions-table", ["Version", "Hash", "Registered", "Owner"],
      versions.map((v) => el("tr", { "data-version": v.version, class: v.hash === f.hash ? "selected" : null },
        el("td", {}, v.hash === f.hash ? el("b", { text: "#" + v.version }) : el("a", { href: link(v), text: "#" + v.version })),
        el("td", { class: "mono", text: v.hash.slice(0, 16) }), el("td", { class: "mono", text: fullTime(v.registered_at) }),
        el("td", { text: v.owner || "" })))) : errorBox(vres),
    el("p", { class: "hint", text: "Every version stays in the store for the runs pinned to it; a new run starts on the latest." }),
    el("h2", { text: "Graph" }), graph,
    el("h2", { text: "Source" }),
    f.files.map((file) => [el("h3", { class: "mono", text: file.path }), el("pre", { class: "source", text: file.src })]));
  drawGraph(graph, (at ? path : base) + "/graph?format=svg");
}

// ---- Dead letters ----

async function deadLettersPage(note) {
  document.title = "Dead letters · weir";
  const res = await api("GET", "/deadletters?limit=1000");
  if (!res.ok) { show(el("h1", { text: "Dead letters" }), errorBox(res)); return; }
  const answer = el("p", { class: "answer", id: "redrive-answer", text: note || "" });
  const redriveBtn = (label, body, what, attrs) => {
    const b = el("button", Object.assign({ type: "button", class: "redrive", text: label }, attrs || {}));
    b.addEventListener("click", () => redriveDeadLetters(body, what, b));
    return b;
  };
  // One button per flow and per tool of the listed dead letters (the
  // first 20 of each): "all of a flow/tool" asks the daemon, which takes
  // the owner's dead letters of it, not only those listed here.
  const distinct = (key) => [...new Set(res.data.map((d) => d[key]).filter((v) => v))].slice(0, 20);
  show(el("h1", { text: "Dead letters" }),
    el("p", { class: "hint", text: "A redrive sends a task back to the queue with its tries counted afresh and the same idempotency key; a run parked on its exhaustion (on_exhausted = \"park\") resumes at the node. A run that ended is never reopened: fork it." }),
    answer,
    res.data.length === 0 ? el("p", { class: "muted", text: "None: no task of yours has exhausted its retries." }) : [
      el("div", { class: "actions", id: "redrive-groups" },
        distinct("flow").map((f) => redriveBtn("Redrive all of flow " + f, { flow: f }, "every dead letter of flow " + f, { "data-flow": f })),
        distinct("tool").map((t) => redriveBtn("Redrive all of tool " + t, { tool: t }, "every dead letter of tool " + t, { "data-tool": t }))),
      table("deadletters-table", ["At", "Run", "Flow", "Node", "Tool", "Every attempt's error", ""],
        res.data.map((d) => el("tr", { "data-task": d.task_id },
          el("td", { class: "mono", text: fullTime(d.at) }), el("td", {}, runLink(d.run_id)), el("td", { text: d.flow }),
          el("td", { text: d.node }), el("td", { text: d.tool || "" }),
          el("td", {}, el("ol", {}, (d.errors || []).map((e) => el("li", {},
            el("b", { text: e.code }), " " + e.message + " ", el("span", { class: "muted", text: "(attempt " + e.attempt + ", " + fullTime(e.at) + ")" }))))),
          el("td", {}, redriveBtn("Redrive", { task_ids: [d.task_id] }, "task " + d.task_id + " of run " + d.run_id)))))]);
}

// redriveDeadLetters asks for a confirmation, redrives what body names
// and shows the answer per task above the list it lists again.
async function redriveDeadLetters(body, what, button) {
  if (!window.confirm("Redrive " + what + "? Each task goes back to the queue with its tries counted afresh; its run resumes at the node.")) return;
  button.disabled = true;
  const res = await api("POST", "/deadletters/redrive", Object.assign({ reason: "redriven from the console" }, body));
  if (!res.ok) {
    button.disabled = false;
    document.getElementById("redrive-answer").textContent = refusal(res);
    return;
  }
  const results = res.data.results || [];
  const refused = results.filter((r) => !r.redriven);
  let note = (results.length - refused.length) + " redriven, " + refused.length + " refused";
  if (refused.length > 0) note += ": " + refused.slice(0, 20).map((r) => r.task_id + " " + (r.error ? r.error.code + ": " + r.error.message : "")).join("; ");
  if (res.data.more) note += " (more match: redrive again)";
  await deadLettersPage(note);
}

// ---- Schedules ----

// schedulesPage lists the caller's schedules with their next tick and
// latest firing, each with pause or resume and "Fire now"; note is the
// answer of the last action.
async function schedulesPage(note) {
  document.title = "Schedules · weir";
  const res = await api("GET", "/schedules?limit=1000");
  if (!res.ok) { show(el("h1", { text: "Schedules" }), errorBox(res)); return; }
  const answer = el("p", { class: "answer", id: "schedule-answer", text: note || "" });
  const action = (label, s, verb, body, confirmText) => {
    const b = el("button", { type: "button", class: "schedule-" + verb, text: label });
    b.addEventListener("click", () => scheduleAction(s.name, verb, body, confirmText, b));
    return b;
  };
  const last = (s) => {
    const f = (s.firings || [])[s.firings.length - 1];
    if (!f) return el("span", { class: "muted", text: "none yet" });
    if (f.skipped) return [fullTime(f.tick) + " skipped: ", el("span", { class: "muted", text: f.skipped })];
    return [fullTime(f.tick) + " ", runLink(f.run_id), " " + (f.phase || "no longer kept")];
  };
  show(el("h1", { text: "Schedules" }),
    el("p", { class: "hint", text: "Declared in flow files with schedule(...) and stored when the file is registered. Each tick starts one run, admitted like any start; a paused schedule fires nothing until resumed, and the ticks it missed are its catch_up policy's." }),
    answer,
    res.data.length === 0 ? el("p", { class: "muted", text: "None: no file you registered declares a schedule." }) :
      table("schedules-table", ["Name", "Flow", "When", "Next tick", "Latest firing", ""],
        res.data.map((s) => el("tr", { "data-schedule": s.name },
          el("td", { class: "mono", text: s.name }), el("td", { text: s.flow }),
          el("td", { class: "mono", text: s.every ? "every " + s.every : s.cron + " " + (s.timezone || "UTC") }),
          el("td", { class: "mono", text: s.paused ? "paused" + (s.pause_reason ? ": " + s.pause_reason : "") : fullTime(s.next) }),
          el("td", {}, last(s)),
          el("td", {},
            s.paused ? action("Resume", s, "resume", {}, "Resume schedule " + s.name + "? The ticks it missed are its catch_up policy's.")
              : action("Pause", s, "pause", { reason: "paused from the console" }, "Pause schedule " + s.name + "? It fires nothing until resumed."),
            action("Fire now", s, "trigger", {}, "Start a run of " + s.flow + " now, with schedule " + s.name + "'s input?"))))));
}

// scheduleAction asks for a confirmation, then pauses, resumes or fires
// the schedule, and lists the schedules again with the answer.
async function scheduleAction(name, verb, body, confirmText, button) {
  if (!window.confirm(confirmText)) return;
  button.disabled = true;
  const res = await api("POST", "/schedules/" + encodeURIComponent(name) + "/" + verb, body);
  if (!res.ok) {
    button.disabled = false;
    document.getElementById("schedule-answer").textContent = refusal(res);
    return;
  }
  const note = verb === "trigger" ? "schedule " + name + " fired: run " + res.data.run_id : "schedule " + name + (verb === "pause" ? " paused" : " resumed");
  await schedulesPage(note);
}

// ---- Events ----

// eventsPage lists the caller's triggers and the events kept, newest
// first, with what each event was delivered to and what each trigger did
// with it; a trigger has Remove; note is the answer of the last action.
async function eventsPage(note) {
  document.title = "Events · weir";
  const [evs, trs] = await Promise.all([api("GET", "/events?limit=1000"), api("GET", "/triggers?limit=1000")]);
  if (!evs.ok || !trs.ok) { show(el("h1", { text: "Events" }), errorBox(evs.ok ? trs : evs)); return; }
  const answer = el("p", { class: "answer", id: "event-answer", text: note || "" });
  const remove = (t) => {
    const b = el("button", { type: "button", class: "trigger-rm", text: "Remove" });
    b.addEventListener("click", () => triggerRemove(t.name, b));
    return b;
  };
  const started = (ev) => {
    const out = [];
    for (const s of ev.started || []) {
      if (out.length) out.push(" ");
      out.push(s.run_id ? runLink(s.run_id) : el("span", { class: "muted", text: s.trigger + " skipped: " + s.skipped }));
    }
    if (ev.triggers_pending) out.push(el("span", { class: "muted", text: " (starting)" }));
    return out.length ? out : el("span", { class: "muted", text: "-" });
  };
  const delivered = (ev) => ev.delivered.length === 0 ? el("span", { class: "muted", text: "kept for a wait" })
    : ev.delivered.map((d, i) => [i ? " " : "", runLink(d.split("/")[0]), " " + d.split("/").slice(1).join("/")]);
  show(el("h1", { text: "Events" }),
    el("p", { class: "hint", text: "Events are sent with weir event send, POST /v1/events or a webhook, and are yours alone: each starts your on_event triggers of its name once, and wakes your runs waiting for it. One that no wait took yet is kept for the event retention, for the first wait that opens on its name and key." }),
    answer,
    el("h2", { text: "Triggers" }),
    trs.data.length === 0 ? el("p", { class: "muted", text: "None: no file you registered declares on_event." }) :
      table("triggers-table", ["Name", "Event", "Flow", "Declared at", ""],
        trs.data.map((t) => el("tr", { "data-trigger": t.name },
          el("td", { class: "mono", text: t.name }), el("td", { class: "mono", text: t.event }),
          el("td", {}, el("a", { href: "/flows/" + encodeURIComponent(t.flow), text: t.flow })),
          el("td", { class: "mono muted", text: t.source || "" }),
          el("td", {}, remove(t))))),
    el("h2", { text: "Events kept" }),
    evs.data.length === 0 ? el("p", { class: "muted", text: "None kept." }) :
      table("events-table", ["Seq", "Id", "Name", "Key", "Accepted", "Delivered to", "Started"],
        evs.data.slice().reverse().map((ev) => el("tr", { "data-event": ev.id },
          el("td", { class: "mono", text: String(ev.seq) }), el("td", { class: "mono", text: ev.id }),
          el("td", { class: "mono", text: ev.name }), el("td", { class: "mono", text: ev.key || "-" }),
          el("td", { class: "mono", text: fullTime(ev.accepted_at) }),
          el("td", {}, delivered(ev)), el("td", {}, started(ev))))));
}

// triggerRemove asks for a confirmation, removes the trigger and lists
// the events page again with the answer.
async function triggerRemove(name, button) {
  if (!window.confirm("Remove trigger " + name + "? Its runs stay; registering its file declares it again.")) return;
  button.disabled = true;
  const res = await api("DELETE", "/triggers/" + encodeURIComponent(name));
  if (!res.ok) {
    button.disabled = false;
    document.getElementById("event-answer").textContent = refusal(res);
    return;
  }
  await eventsPage("trigger " + name + " removed");
}

// ---- Status ----

const SVG = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// chart draws one small line chart of the history: series are
// { name, values } with one value per sample (null: no figure then).
function chart(id, title, times, series, fmt) {
  const W = 260, H = 64, P = 2;
  const all = series.flatMap((s) => s.values).filter((v) => v !== null);
  const top = Math.max(1e-9, ...all);
  const t0 = times[0], t1 = times[times.length - 1];
  const x = (t) => P + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - 2 * P);
  const y = (v) => H - P - (v / top) * (H - 2 * P);
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "spark" });
  svg.append(svgEl("line", { x1: 0, y1: H - P, x2: W, y2: H - P, class: "axis" }));
  series.forEach((s, i) => {
    const pts = [];
    s.values.forEach((v, j) => { if (v !== null) pts.push(x(times[j]).toFixed(1) + "," + y(v).toFixed(1)); });
    if (pts.length === 1) pts.push(pts[0].replace(/^[^,]+/, (a) => (Number(a) - 2).toFixed(1)));
    svg.append(svgEl("polyline", { points: pts.join(" "), class: "series s" + i }));
  });
  const last = (s) => { for (let j = s.values.length - 1; j >= 0; j--) if (s.values[j] !== null) return fmt(s.values[j]); return "–"; };
  return el("figure", { class: "chart", id, "data-samples": times.length },
    el("figcaption", {}, el("b", { text: title }), " ",
      series.map((s, i) => el("span", { class: "key s" + i, text: s.name + " " + last(s) }))),
    svg, el("div", { class: "range muted", text: "max " + fmt(all.length ? top : 0) }));
}

// historyCharts draws the last hour: the status, each tool's four
// figures and each model's tokens and cost, one value per sample.
function historyCharts(hist) {
  const samples = hist.samples || [];
  if (samples.length === 0) return el("p", { class: "muted", id: "history", text: "No sample yet: the first is taken within seconds of the start." });
  const times = samples.map((s) => new Date(s.at).getTime());
  const ms = (v) => v.toFixed(1) + " ms", n = (v) => String(Math.round(v)), ratio = (v) => v.toFixed(2);
  const names = (key, field) => [...new Set(samples.flatMap((s) => (s[key] || []).map((x) => x[field])))].sort();
  const pick = (key, field, name, f) => samples.map((s) => { const x = (s[key] || []).find((o) => o[field] === name); return x ? f(x) : null; });
  const status = el("div", { class: "charts" },
    chart("chart-tasks", "Tasks", times, [
      { name: "queued", values: samples.map((s) => s.queued) },
      { name: "held", values: samples.map((s) => s.held) },
      { name: "parked", values: samples.map((s) => s.parked) }], n),
    chart("chart-slots", "Slots", times, [{ name: "slots", values: samples.map((s) => s.slots) }], n),
    chart("chart-admission", "Admission open", times, [{ name: "open", values: samples.map((s) => (s.admission === "open" ? 1 : 0)) }], (v) => (v ? "yes" : "no")));
  const tools = names("types", "type").map((t) => el("div", { class: "charts", "data-type": t }, el("h3", { text: t }),
    chart(null, "Queue wait", times, [{ name: "mean", values: pick("types", "type", t, (x) => x.wait_mean_ns / 1e6) }], ms),
    chart(null, "Execution", times, [{ name: "mean", values: pick("types", "type", t, (x) => x.exec_mean_ns / 1e6) }], ms),
    chart(null, "Attempts and units", times, [
      { name: "attempts", values: pick("types", "type", t, (x) => x.attempts) },
      { name: "units", values: pick("types", "type", t, (x) => x.units) }], n),
    chart(null, "Amplification", times, [{ name: "attempts ÷ units", values: pick("types", "type", t, (x) => (x.units ? x.amplification : null)) }], ratio)));
  const models = names("models", "model").map((m) => el("div", { class: "charts", "data-model": m }, el("h3", { text: m }),
    chart(null, "Tokens", times, [
      { name: "in", values: pick("models", "model", m, (x) => x.input_tokens) },
      { name: "out", values: pick("models", "model", m, (x) => x.output_tokens) }], n),
    chart(null, "Cost", times, [{ name: "cost", values: pick("models", "model", m, (x) => x.cost) }], n)));
  return el("section", { id: "history" },
    el("p", { class: "hint", text: `One sample every ${hist.interval_ns / 1e9} s over the last ${hist.window_ns / 6e10} minutes, from ${fullTime(samples[0].at)} to ${fullTime(samples[samples.length - 1].at)}; each tool and model figure is that of its own ${hist.interval_ns / 1e9} s. The daemon keeps them in memory: a restart starts them again.` }),
    status, tools.length ? [el("h3", { text: "Tools" }), tools] : null, models.length ? [el("h3", { text: "Models" }), models] : null);
}

// ownersTable shows each owner's use beside its share: every owner to the
// operator, only the caller's own to anyone else (the daemon says which).
function ownersTable(d) {
  const owners = d.owners || [];
  const quota = (v) => (v ? String(v) : "—");
  return [el("p", { class: "hint", text: d.all ? "Every owner with work, spending or a block in the config, most used first." : "Your own use and share: other owners' are shown to the operator only." }),
    table("owners-table", ["Owner", "Running", "Queued", "Spent (last hour)", "Weight", "Max running", "Max queued", "Budget per hour"],
      owners.map((o) => el("tr", { "data-owner": o.owner }, el("td", { text: o.owner }),
        el("td", { class: "num", text: o.running }), el("td", { class: "num", text: o.queued }), el("td", { class: "num", text: o.spent }),
        el("td", { class: "num", text: o.weight }), el("td", { class: "num", text: quota(o.max_running) }),
        el("td", { class: "num", text: quota(o.max_queued) }), el("td", { class: "num", text: quota(o.budget_per_hour) }))))];
}

async function statusPage() {
  document.title = "Status · weir";
  const [h, st, hist, ow] = await Promise.all([api("GET", "/health"), api("GET", "/stats"), api("GET", "/stats/history"), api("GET", "/stats/owners")]);
  const s = h.data || {};
  if (!s.admission) { show(el("h1", { text: "Status" }), errorBox(h)); return; }
  const c = s.config || {};
  const types = (st.ok && st.data.types) || [];
  const models = (st.ok && st.data.models) || [];
  const ms = (ns) => (ns / 1e6).toFixed(1) + " ms";
  show(el("h1", { text: "Status" }),
    grid([["Admission", el("b", { id: "admission", text: s.admission })], ["Reason", s.reason],
      ["Slots", String(s.slots)], ["Queued", String(s.queued)], ["Held", String(s.held)],
      ["Config version", c.version !== undefined ? String(c.version) : ""], ["Config file", c.file],
      ["Config hash", c.hash ? el("span", { class: "mono", text: c.hash.slice(0, 16) }) : ""], ["Loaded", fullTime(c.loaded_at)],
      ["Pinned by flags", (c.pinned || []).join(", ")],
      ["Signed in as", s.caller ? s.caller.owner : ""]]),
    el("h2", { text: "Tools" }),
    types.length === 0 ? el("p", { class: "muted", text: "No task has run since the daemon started." }) :
      table("stats-table", ["Type", "Queue wait mean", "Execution mean", "Attempts", "Units", "Amplification"],
        types.map((t) => el("tr", {}, el("td", { text: t.type }),
          el("td", { class: "num", text: ms(t.wait_mean_ns) }), el("td", { class: "num", text: ms(t.exec_mean_ns) }),
          el("td", { class: "num", text: t.attempts }), el("td", { class: "num", text: t.units }),
          el("td", { class: "num", text: (t.amplification || 0).toFixed(2) })))),
    models.length ? [el("h2", { text: "Models" }), table("models-table", ["Model", "Turns", "Input tokens", "Output tokens", "Cost"],
      models.map((m) => el("tr", {}, el("td", { text: m.model }), el("td", { class: "num", text: m.turns }),
        el("td", { class: "num", text: m.input_tokens }), el("td", { class: "num", text: m.output_tokens }), el("td", { class: "num", text: m.cost }))))] : null,
    el("p", { class: "hint", text: "Figures since the daemon started, kept in memory." }),
    el("h2", { text: "Owners" }), ow.ok ? ownersTable(ow.data) : errorBox(ow),
    el("h2", { text: "The last hour" }), hist.ok ? historyCharts(hist.data) : errorBox(hist));
}

// ---- Start ----

async function start() {
  const res = await fetch("/session", { credentials: "same-origin" });
  if (res.status === 401) {
    location.href = "/signin?next=" + encodeURIComponent(location.pathname + location.search);
    return;
  }
  Object.assign(session, await res.json());
  document.getElementById("who").textContent = session.owner;
  document.getElementById("signout-csrf").value = session.csrf;
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", a.dataset.nav === parts[0]);
  try {
    if (parts[0] === "runs" && parts.length === 1) await runsPage();
    else if (parts[0] === "runs" && parts.length === 2) await runPage(parts[1]);
    else if (parts[0] === "flows" && parts.length === 1) await flowsPage();
    else if (parts[0] === "flows" && parts.length === 2) await flowPage(parts[1]);
    else if (parts[0] === "deadletters") await deadLettersPage();
    else if (parts[0] === "schedules") await schedulesPage();
    else if (parts[0] === "events") await eventsPage();
    else if (parts[0] === "status") await statusPage();
    else show(el("h1", { text: "No such page" }));
  } catch (e) {
    show(el("h1", { text: "Error" }), el("p", { class: "error", text: String(e) }));
  }
  document.body.dataset.ready = "true";
}

start();
