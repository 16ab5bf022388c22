// EoK page: vanilla JS, no build step, no third-party code. Everything shown comes from the API; text is
// always inserted as text (never as HTML) because titles, code and feedback come from mined repositories.
"use strict";

const KEY_STORE = "eok.apiKey";
const state = {
  cursor: null, run: null, stream: null, vocab: null, role: null, queries: [], answer: null, graph: null,
  compare: new Set(),
};
const ROLES = { reader: 1, analyst: 2, operator: 3 };

// -- small DOM helpers --------------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const fmt = (x, digits = 2) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));
const speed = (x) => (x === null || x === undefined ? "–" : `${Number(x).toFixed(2)}×`);
// Both speedups of an experience or run: over the competent baseline, then over plain clang -O3.
const speeds = (competent, plain) => (plain === null || plain === undefined ? "–" : `${speed(competent)} / ${speed(plain)}`);
// In words, as every surface says it (agent.report.yardstick): "1.12× over competent, 6.95× over -O3".
const yardstick = (competent, plain, library, label) => (plain === null || plain === undefined ? "–"
  : (competent ? `${speed(competent)} over competent, ${speed(plain)} over -O3` : `${speed(plain)} over -O3`)
    + overLibrary(library, label, ", "));
// Over a built library's own routine, only where one was configured: " · 1.05× over openblas@0123456789".
const overLibrary = (library, label, sep = " · ") => (library && label ? `${sep}${speed(library)} over ${label}` : "");
const when = (iso) => (iso ? iso.replace("T", " ").slice(0, 16) : "");
const statusClass = (s) => (s === "ok" || s === "done" ? "st-ok" : s ? "st-bad" : "");

function fillSelect(select, values, keepFirst = true) {
  const first = keepFirst ? select.querySelector("option") : null;
  select.replaceChildren(...(first ? [first] : []));
  for (const v of values) {
    const [value, label] = Array.isArray(v) ? v : [v, v];
    select.append(el("option", { value }, label));
  }
}

// -- API access ---------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code || "http_error";
    this.hint = err.hint || "";
  }
}

function authHeaders() {
  const key = sessionStorage.getItem(KEY_STORE);
  return key ? { "X-API-Key": key } : {};
}

async function api(path, options = {}) {
  const init = { ...options, headers: { ...authHeaders(), ...(options.headers || {}) } };
  if (options.json !== undefined) {
    init.method = init.method || "POST";
    init.body = JSON.stringify(options.json);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, init);
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

function showError(err) {
  const banner = $("banner");
  banner.replaceChildren(
    el("strong", {}, err instanceof ApiError ? `${err.status} ${err.code}: ` : "error: "),
    err.message,
    err.hint ? el("span", { class: "hint" }, err.hint) : null,
  );
  banner.classList.remove("hidden");
}

function clearError() {
  $("banner").classList.add("hidden");
}

async function guarded(fn) {
  clearError();
  try {
    return await fn();
  } catch (err) {
    showError(err);
    return undefined;
  }
}

// -- key and start-up ---------------------------------------------------------------------------------

async function useKey(event) {
  if (event) event.preventDefault();
  const key = $("api-key").value.trim();
  if (key) sessionStorage.setItem(KEY_STORE, key);
  $("api-key").value = "";
  await loadCatalog();
}

async function loadHealth() {
  try {
    const h = await api("/health");
    $("health").textContent =
      `Neo4j ${h.neo4j_version} · schema v${h.schema_version} · ${h.index_size} vectors · ` +
      `${h.nodes.Thought || 0} thoughts · ${h.nodes.Experience || 0} experiences` + (h.agent ? "" : " · agent missing");
  } catch (err) {
    $("health").textContent = `service unhealthy: ${err.message}`;
  }
}

async function loadCatalog() {
  const status = $("key-status");
  if (!sessionStorage.getItem(KEY_STORE)) {
    status.textContent = "no key yet";
    return;
  }
  const ok = await guarded(async () => {
    const me = await api("/whoami");
    applyRole(me.role);
    const [vocab, targets, tasks] = await Promise.all([api("/vocabulary"), api("/targets"), api("/tasks")]);
    state.vocab = vocab;
    const targetKeys = targets.map((t) => [t.key, `${t.key} · ${t.name}`]);
    for (const id of ["search-target", "exp-target"]) fillSelect($(id), targetKeys);
    fillSelect($("run-target"), targetKeys, false);
    $("run-target").value = targets.some((t) => t.key === "k1-x60") ? "k1-x60" : targets[0]?.key || "";
    fillSelect($("search-operator"), vocab.operators);
    fillSelect($("search-isa"), vocab.isas);
    fillSelect($("search-technique"), vocab.techniques);
    fillSelect($("exp-status"), vocab.statuses);
    const taskNames = tasks.map((t) => [t.name, `${t.name} · ${t.operator}`]);
    fillSelect($("exp-task"), taskNames);
    fillSelect($("run-task"), taskNames, false);
    return true;
  });
  status.textContent = ok ? "key accepted" : "key not accepted";
  status.title = ok ? `role: ${state.role}` : "";
  if (ok) {
    loadRuns();
    loadOverview();
    if (ROLES[state.role] >= ROLES.analyst) {
      loadSavedQueries();
      loadSchema();
    }
    route();
  }
}

// Controls a role cannot use are not shown (the API refuses them anyway): data-min-role on the element.
function applyRole(role) {
  state.role = role;
  for (const node of document.querySelectorAll("[data-min-role]")) {
    node.classList.toggle("hidden", (ROLES[role] || 0) < ROLES[node.dataset.minRole]);
  }
}

// -- overview: the first screen -------------------------------------------------------------------------

async function loadOverview() {
  const o = await guarded(() => api("/overview"));
  if (!o) return;
  $("overview-hint").classList.add("hidden");
  $("overview-counts").replaceChildren(...Object.entries(o.nodes).sort((a, b) => b[1] - a[1])
    .map(([label, n]) => el("div", { class: "count" }, el("strong", {}, n.toLocaleString()), el("span", {}, label))));
  $("overview-runs").replaceChildren(...o.recent_runs.map((r) => el("tr", {
    class: "clickable", onclick: () => openRun(r.id) },
  el("td", {}, el("code", {}, r.id)), el("td", {}, r.task_id), el("td", {}, r.target_key),
  el("td", { class: statusClass(r.status) }, r.status), el("td", { class: "num" }, `${r.evaluations}/${r.budget}`),
  el("td", { class: "num", title: r.baseline_note || "" }, speeds(r.best_competent_speedup, r.best_speedup)
    + overLibrary(r.best_speedup_over_library, r.library_label) + (r.baseline_note ? " *" : "")),
  el("td", { class: "muted" }, when(r.started_at)))));
  $("overview-techniques").replaceChildren(...o.top_techniques.map((t) => el("tr", {},
    el("td", {}, t.target), el("td", {}, t.technique),
    el("td", { class: (t.mean_competent_speedup ?? t.mean_speedup) >= 1 ? "num st-ok" : "num st-bad" },
      speeds(t.mean_competent_speedup, t.mean_speedup)),
    el("td", { class: "num" }, t.trials), el("td", { class: "num" }, t.thoughts))));
}

function switchTab(button) {
  for (const tab of document.querySelectorAll(".tab")) {
    tab.classList.toggle("active", tab === button);
    $(tab.dataset.panel).classList.toggle("hidden", tab !== button);
  }
  if (button.id === "tab-runs") loadRuns();
  if (button.id === "tab-overview") loadOverview();
}

// -- search -------------------------------------------------------------------------------------------

async function search(event) {
  event.preventDefault();
  const params = new URLSearchParams({ q: $("search-q").value, k: "20" });
  for (const [name, id] of [["kind", "search-kind"], ["target", "search-target"], ["operator", "search-operator"],
                            ["isa", "search-isa"], ["technique", "search-technique"]]) {
    if ($(id).value) params.set(name, $(id).value);
  }
  const result = await guarded(() => api(`/ideas/search?${params}`));
  if (!result) return;
  $("search-summary").textContent = `${result.hits.length} results for “${result.query}”`;
  $("search-results").replaceChildren(...result.hits.map(hitCard));
}

function hitCard(hit) {
  const n = hit.node || {};
  const chips = [el("span", { class: `chip kind-${hit.kind}` }, hit.kind)];
  for (const field of ["technique", "isa", "operator", "task_id", "target_key", "status"]) {
    if (n[field]) chips.push(el("span", { class: "chip" }, n[field]));
  }
  if (n.speedup) {
    const lead = n.competent_speedup ?? n.speedup;
    chips.push(el("span", { class: lead >= 1 ? "chip good" : "chip bad" }, yardstick(n.competent_speedup, n.speedup)));
  }
  if (hit.measured && hit.measured.trials) {
    // Geometric means over the correct trials: over the competent baseline first, plain -O3 beside it.
    const m = hit.measured;
    chips.push(m.mean_speedup === null
      ? el("span", { class: "chip bad" }, `measured: 0/${m.trials} correct on ${m.target}`)
      : el("span", { class: m.mean_gain >= 1 ? "chip good" : "chip bad" },
        `measured ${yardstick(m.mean_competent_speedup, m.mean_speedup)} (gain ${speed(m.mean_gain)}), ` +
        `${m.correct}/${m.trials} correct on ${m.target}`));
  }
  // A claim is what a commit message said, not a measurement: shown small, after the measured effect.
  if (n.prior_speedup) chips.push(claim(n.prior_speedup, n.evidence_commits));
  chips.push(el("span", { class: "score" }, `score ${fmt(hit.score, 4)}`));
  const text = n.description || n.principle || n.summary || "";
  return el("li", { class: "hit", "data-kind": hit.kind, "data-id": hit.id, onclick: () => openItem(hit.kind, hit.id) },
    el("div", { class: "title" }, hit.title),
    text ? el("p", { class: "desc" }, text) : null,
    el("div", { class: "meta" }, chips));
}

function claim(x, commits) {
  const source = commits ? `${commits} commit message${commits === 1 ? "" : "s"}` : "commit messages";
  return el("span", { class: "claim", title: "parsed from commit messages; not measured by EoK" },
    `claim ${speed(x)} (${source})`);
}

// -- details ------------------------------------------------------------------------------------------

function openItem(kind, id) {
  if (kind === "thought") return openThought(id);
  if (kind === "idea") return openIdea(id);
  return openExperience(id);
}

function showDetail(...children) {
  // Optional sections arrive as null or as arrays of nodes: flatten and drop the empty ones.
  const nodes = children.flat(2).filter((c) => c !== null && c !== undefined && c !== false);
  $("detail-body").replaceChildren(...nodes);
  $("detail").classList.remove("hidden");
}

function table(id, headers, rows) {
  return el("table", { class: "grid", id },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

async function openThought(id) {
  const t = await guarded(() => api(`/thoughts/${encodeURIComponent(id)}`));
  if (!t) return;
  const commits = t.evidence.map((c) => el("tr", {},
    el("td", {}, c.repo),
    el("td", {}, c.url ? el("a", { href: c.url, target: "_blank", rel: "noopener" }, c.sha.slice(0, 10))
                       : el("code", {}, c.sha.slice(0, 10))),
    el("td", {}, c.title),
    el("td", { class: "num" }, c.perf_claims.map(speed).join(", "))));
  const effects = t.effects.map((e) => el("tr", {},
    el("td", {}, e.target), el("td", { class: "num" }, e.trials), el("td", { class: "num" }, e.correct),
    el("td", { class: "num" }, e.successes), el("td", { class: "num" }, speeds(e.mean_competent_speedup, e.mean_speedup)),
    el("td", { class: "num" }, speed(e.mean_gain)),
    el("td", { class: "num" }, e.success_rate === null ? "–" : `${Math.round(100 * e.success_rate)}%`)));
  const experiences = t.experiences.map(experienceRow);
  showDetail(
    el("h2", { id: "detail-title" }, t.title),
    el("div", { class: "meta" },
      el("span", { class: "chip kind-thought" }, "thought"), el("span", { class: "chip" }, t.technique),
      el("span", { class: "chip" }, t.isa), el("span", { class: "chip" }, t.operator),
      t.prior_speedup ? claim(t.prior_speedup, t.evidence.length) : null),
    t.idea ? el("p", {}, "idea: ", el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); openIdea(t.idea.id); } },
      t.idea.title)) : null,
    el("p", { class: "desc" }, t.description),
    t.example_code ? el("pre", {}, t.example_code) : null,
    el("h3", {}, `Evidence commits (${t.evidence.length})`),
    t.evidence.length ? table("evidence-table", ["repo", "commit", "title", "claim"], commits)
                      : el("p", { class: "muted" }, "none recorded"),
    el("h3", {}, "Measured effect per target"),
    t.effects.length ? table("effects-table", ["target", "trials", "correct", "improved", "speedup: competent / -O3", "gain", "success"], effects)
                     : el("p", { class: "muted" }, "not tried yet"),
    el("h3", {}, `Experiences that applied it (${t.experiences.length})`),
    t.experiences.length ? table("thought-experiences", ["experience", "task", "target", "status", "speedup: competent / -O3"],
      experiences) : el("p", { class: "muted" }, "none yet"),
  );
}

function experienceRow(x) {
  return el("tr", { class: "clickable", onclick: () => openExperience(x.id) },
    el("td", {}, el("code", {}, x.id)), el("td", {}, x.task_id), el("td", {}, x.target_key),
    el("td", { class: statusClass(x.status) }, x.status), el("td", { class: "num" }, speeds(x.competent_speedup, x.speedup)));
}

async function openIdea(id) {
  const idea = await guarded(() => api(`/ideas/${encodeURIComponent(id)}`));
  if (!idea) return;
  const rows = idea.thoughts.map((t) => el("tr", { class: "clickable", onclick: () => openThought(t.id) },
    el("td", {}, t.title), el("td", {}, t.technique), el("td", {}, t.isa), el("td", {}, t.operator),
    el("td", { class: "num" }, t.evidence_commits), el("td", { class: "num" }, `${t.successes}/${t.trials}`)));
  showDetail(
    el("h2", { id: "detail-title" }, idea.title),
    el("div", { class: "meta" }, el("span", { class: "chip kind-idea" }, "idea"),
      idea.techniques.map((x) => el("span", { class: "chip" }, x))),
    el("p", { class: "desc" }, idea.principle),
    el("h3", {}, `Thoughts (${idea.thoughts.length})`),
    table("idea-thoughts", ["thought", "technique", "ISA", "operator", "commits", "ok/tried"], rows),
  );
}

async function openExperience(id) {
  const x = await guarded(() => api(`/experiences/${encodeURIComponent(id)}`));
  if (!x) return;
  showDetail(
    el("h2", { id: "detail-title" }, x.summary || x.id),
    el("div", { class: "meta" }, el("span", { class: "chip kind-experience" }, "experience"),
      el("span", { class: "chip" }, x.task_id), el("span", { class: "chip" }, x.target_key),
      el("span", { class: x.status === "ok" ? "chip good" : "chip bad" }, x.status),
      x.competent_speedup ? el("span", { class: "chip" }, `${speed(x.competent_speedup)} over the competent baseline`) : null,
      x.speedup !== null ? el("span", { class: "chip" }, `${speed(x.speedup)} over clang -O3`) : null,
      el("span", { class: "chip" }, x.measurement), el("span", { class: "chip" }, x.generator)),
    x.thoughts.length ? el("p", {}, "applied: ", x.thoughts.map((t, i) => [i ? ", " : "",
      el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); openThought(t.id); } }, t.title)])) : null,
    x.cflags.length ? el("p", {}, "flags: ", el("code", {}, x.cflags.join(" "))) : null,
    x.feedback ? [el("h3", {}, "Feedback"), el("pre", {}, x.feedback)] : null,
    x.code ? [el("h3", {}, "Code"), el("pre", {}, x.code)] : null,
  );
}

// -- experiences --------------------------------------------------------------------------------------

async function listExperiences(event, more = false) {
  if (event) event.preventDefault();
  const params = new URLSearchParams({ limit: "25" });
  for (const [name, id] of [["task", "exp-task"], ["target", "exp-target"], ["status", "exp-status"],
                            ["min_speedup", "exp-min"]]) {
    if ($(id).value) params.set(name, $(id).value);
  }
  if (more && state.cursor) params.set("cursor", state.cursor);
  const page = await guarded(() => api(`/experiences?${params}`));
  if (!page) return;
  const rows = page.items.map((x) => el("tr", { class: "clickable", onclick: () => openExperience(x.id) },
    el("td", {}, el("code", {}, x.id)), el("td", {}, x.task_id), el("td", {}, x.target_key),
    el("td", { class: statusClass(x.status) }, x.status),
    el("td", { class: "num" }, speeds(x.competent_speedup, x.speedup) + overLibrary(x.speedup_over_library, x.library_label)),
    el("td", {}, x.summary), el("td", { class: "muted" }, when(x.created_at))));
  if (more) $("exp-rows").append(...rows);
  else $("exp-rows").replaceChildren(...rows);
  state.cursor = page.next_cursor;
  $("exp-more").classList.toggle("hidden", !page.next_cursor);
}

// -- runs ---------------------------------------------------------------------------------------------

async function loadRuns() {
  if (!sessionStorage.getItem(KEY_STORE)) return;
  loadBootstraps();
  const list = await api("/runs?limit=10").catch(() => null);
  if (!list) return;
  $("runs-rows").replaceChildren(...list.items.map((r) => el("tr", { class: "clickable", onclick: () => openRun(r.id) },
    el("td", { onclick: (ev) => ev.stopPropagation() }, el("input", {
      type: "checkbox", class: "compare-pick", value: r.id, title: "compare", checked: state.compare.has(r.id),
      onchange: (ev) => { if (ev.target.checked) state.compare.add(r.id); else state.compare.delete(r.id); pickedRuns(); } })),
    el("td", {}, el("code", {}, r.id)), el("td", {}, r.task_id), el("td", {}, r.target_key),
    el("td", { class: statusClass(r.status) }, r.status), el("td", { class: "num" }, `${r.evaluations}/${r.budget}`),
    el("td", { class: "num" }, speeds(r.best_competent_speedup, r.best_speedup)
      + overLibrary(r.best_speedup_over_library, r.library_label)))));
  pickedRuns();
}

async function loadBootstraps() {
  const list = await api("/bootstraps?limit=10").catch(() => null);
  if (!list) return;
  $("bootstraps-rows").replaceChildren(...list.items.map((b) => el("tr", {},
    el("td", {}, el("a", { href: `#/bootstraps/${encodeURIComponent(b.id)}`, title: b.url }, b.id)), el("td", { class: statusClass(b.status) }, b.status),
    el("td", { class: "num" }, `${b.runs_done}/${b.runs_total}`), el("td", {}, `${b.tasks} × ${b.targets}`),
    el("td", { class: "muted" }, when(b.created_at)), el("td", { class: "muted" }, when(b.updated_at)),
    el("td", { class: "muted" }, b.executors.length ? b.executors[b.executors.length - 1] : b.executor))));
  $("bootstraps-none").classList.toggle("hidden", list.items.length > 0);
}

function pickedRuns() {
  $("compare-go").disabled = state.compare.size < 2;
  $("compare-go").textContent = state.compare.size >= 2 ? `Compare ${state.compare.size} runs` : "Compare";
}

// -- routes: #/runs/ID opens a run, #/compare/A,B compares runs (links to share or bookmark) ------------

function openRun(id) {
  location.hash = `#/runs/${encodeURIComponent(id)}`;
}

function route() {
  if (!sessionStorage.getItem(KEY_STORE) || !state.role) return;
  const m = /^#\/(runs|compare|bootstraps)\/(.+)$/.exec(location.hash);
  if (!m) return;
  switchTab($("tab-runs"));
  if (m[1] === "runs") {
    const id = decodeURIComponent(m[2]);
    if (!state.run || state.run.id !== id || $("run-view").classList.contains("hidden")) watchRun(id);
  } else if (m[1] === "bootstraps") {
    openBootstrap(decodeURIComponent(m[2]));
  } else {
    compareRuns(m[2].split(",").map(decodeURIComponent).filter(Boolean).slice(0, 6));
  }
}

async function startRun(event) {
  event.preventDefault();
  const body = {
    task: $("run-task").value, target: $("run-target").value, budget: Number($("run-budget").value),
    directions: Number($("run-directions").value), generator: $("run-generator").value,
  };
  const accepted = await guarded(() => api("/runs", { json: body }));
  if (accepted) openRun(accepted.id);
}

function resetRunView(id) {
  state.run = { id, points: [], best: [], dirs: new Map(), budget: 0, done: false };
  showOnly("run-view");
  $("run-params").replaceChildren();
  $("run-artefacts").replaceChildren(el("li", { class: "muted" }, "none yet"));
  $("run-link").href = `#/runs/${encodeURIComponent(id)}`;
  $("run-link").textContent = `${location.origin}${location.pathname}#/runs/${id}`;
  for (const x of ["run-diff", "run-diff-title"]) $(x).classList.add("hidden");
  $("run-outcome").classList.add("hidden");
  $("run-id").textContent = id;
  $("run-status").textContent = "queued";
  $("run-status").className = "";
  $("run-evals").textContent = "0";
  $("run-best").textContent = "–";
  $("run-best-competent").textContent = "–";
  $("run-log").replaceChildren();
  $("run-progress").value = 0;
  $("run-cancel").disabled = false;
  drawPlot();
}

async function watchRun(id) {
  if (state.stream) state.stream.abort();
  resetRunView(id);
  const controller = new AbortController();
  state.stream = controller;
  loadRunDetail(id);
  try {
    const response = await fetch(`/runs/${encodeURIComponent(id)}/events`, {
      headers: authHeaders(), signal: controller.signal,
    });
    if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
    await readEvents(response.body, onRunEvent);
  } catch (err) {
    if (err.name !== "AbortError") showError(err);
  }
  if (state.run && state.run.id === id && !state.run.done) $("run-status").textContent += " (stream closed)";
  loadRuns();
}

// Server-sent events read with fetch (EventSource cannot send the API key header).
async function readEvents(stream, onEvent) {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data) onEvent(JSON.parse(data));
    }
  }
}

function onRunEvent(ev) {
  const run = state.run;
  if (!run || ev.run_id !== run.id) return;
  run.budget = ev.budget || run.budget;
  const evaluated = ev.kind === "evaluation" || ev.kind === "improved";
  if (evaluated) {
    run.points.push(ev.status === "ok" ? ev.speedup : null);
    run.best.push(ev.best_speedup);  // the plot's axis is over -O3 (both baselines divide the same time)
    // Per direction: that direction's own best so far, at the evaluations it made.
    const dir = ev.direction || "(none)";
    const series = run.dirs.get(dir) || [];
    const prev = series.length ? series[series.length - 1][1] : null;
    const mine = ev.status === "ok" && ev.speedup ? ev.speedup : null;
    series.push([run.best.length - 1, mine !== null && (prev === null || mine > prev) ? mine : prev]);
    run.dirs.set(dir, series);
  }
  const terminal = ["finished", "failed", "cancelled"].includes(ev.kind);
  const status = terminal ? (ev.status || ev.kind) : ev.kind === "started" ? "running" : $("run-status").textContent;
  $("run-status").textContent = terminal && ev.kind === "finished" ? "done" : status;
  $("run-status").className = terminal ? statusClass(ev.kind === "finished" ? "done" : "failed") : "";
  $("run-evals").textContent = `${ev.evaluations}${run.budget ? ` / ${run.budget}` : ""}`;
  if (ev.best_competent_speedup) $("run-best-competent").textContent = speed(ev.best_competent_speedup);
  if (ev.best_speedup !== null && ev.best_speedup !== undefined) $("run-best").textContent = speed(ev.best_speedup);
  $("run-progress").value = run.budget ? Math.min(1, ev.evaluations / run.budget) : 0;
  const text = evaluated
    ? `#${ev.evaluations} ${ev.direction ? `[${ev.direction}] ` : ""}${ev.status}` +
      `${ev.speedup ? ` ${yardstick(ev.competent_speedup, ev.speedup)}` : ""}` +
      (ev.message ? ` · ${ev.message}` : "")
    : `${ev.kind}${ev.message ? `: ${ev.message}` : ""}`;
  const cls = ev.kind === "improved" ? "improved" : ev.kind === "failed" ? "failed" : "";
  $("run-log").append(el("li", { class: cls }, text));
  $("run-log").scrollTop = $("run-log").scrollHeight;
  if (terminal) {
    run.done = true;
    $("run-cancel").disabled = true;
    showOutcome(run.id);
  }
  drawPlot();
}

// At the end of a run: the best kernel and the chain of experiences, thoughts, ideas and commits behind it.
async function showOutcome(id) {
  const r = await guarded(() => api(`/runs/${encodeURIComponent(id)}`));
  if (!r || !state.run || state.run.id !== id) return;
  $("run-outcome").classList.remove("hidden");
  $("run-outcome-best").replaceChildren(...(r.best
    ? [el("code", {}, r.best.experience_id), ` · ${yardstick(r.best.competent_speedup, r.best.speedup, r.best.speedup_over_library, r.best.library_label)} · ${r.best.summary || ""}`,
       ...(r.baseline_note ? [el("br"), el("strong", {}, `Note: ${r.baseline_note}.`)] : [])]
    : ["no correct candidate was found"]));
  const lastCode = r.best ? await api(`/experiences/${encodeURIComponent(r.best.experience_id)}`).catch(() => null) : null;
  $("run-outcome-code").textContent = lastCode && lastCode.code ? lastCode.code : "";
  $("run-outcome-code").classList.toggle("hidden", !(lastCode && lastCode.code));
  showParentDiff(lastCode);
  $("run-lineage").replaceChildren(...r.lineage.map((s) => el("tr", {},
    el("td", { class: "num" }, s.depth), el("td", {}, el("code", {}, s.experience)),
    el("td", { class: statusClass(s.status) }, s.status), el("td", { class: "num" }, speeds(s.competent_speedup, s.speedup)),
    el("td", {}, s.thought ? el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); openThought(s.thought); } },
      s.thought_title || s.thought) : "–"),
    el("td", {}, s.idea_title || s.idea || "–"),
    el("td", {}, (s.commits || []).map((c, i) => [i ? ", " : "", c.url
      ? el("a", { href: c.url, target: "_blank", rel: "noopener", class: "commit" }, `${c.repo}@${c.sha.slice(0, 10)}`)
      : el("code", {}, `${c.repo}@${c.sha.slice(0, 10)}`)])))));
}

// The run's record as it was asked for: a parameters panel, and the files its folder holds.
async function loadRunDetail(id) {
  const [r, files] = await Promise.all([api(`/runs/${encodeURIComponent(id)}`).catch((err) => err),
    api(`/runs/${encodeURIComponent(id)}/artefacts`).catch(() => null)]);
  if (!state.run || state.run.id !== id) return;
  if (r instanceof Error) { showError(r); return; }
  $("run-params").replaceChildren(...runParams(r).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {},
    k === "bootstrap" && r.bootstrap_id ? el("a", { href: `#/bootstraps/${encodeURIComponent(r.bootstrap_id)}` }, v) : v))));
  const items = files ? files.items : [];
  $("run-artefacts").replaceChildren(...(items.length ? items.map((a) => el("li", {},
    el("a", { href: "#", class: "artefact", "data-name": a.name, onclick: (ev) => { ev.preventDefault(); openArtefact(id, a); } }, a.name),
    el("span", { class: "muted" }, ` ${Math.max(1, Math.round(a.bytes / 1024))} KiB`))) : [el("li", { class: "muted" }, "no files (the run folder is on another machine, or not written yet)")]),
  ...(files && files.candidates ? [el("li", { class: "muted" }, `${files.candidates} candidate files under candidates/`)] : []));
}

function runParams(r) {
  return [["task", r.task_id], ["target", r.target_key], ["budget", r.budget], ["directions", r.directions],
    ["generator", r.generator], ["seed", r.seed], ["runner", r.runner || "default"],
    ["bootstrap", r.bootstrap_id || "–"], ["started", when(r.started_at)], ["finished", when(r.finished_at) || "–"],
    ["started by", r.started_by || "–"], ["LLM calls", r.llm_calls], ["error", r.error || "–"]];
}

// Artefacts need the API key, so a plain link cannot fetch them: read with the key, show, offer a download.
async function openArtefact(runId, a) {
  const response = await fetch(a.url, { headers: authHeaders() }).catch((err) => err);
  if (response instanceof Error || !response.ok) {
    showError(response instanceof Error ? response
      : new ApiError(response.status, await response.json().catch(() => null)));
    return;
  }
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  const body = a.name.endsWith(".png") ? el("img", { src: url, alt: `${a.name} of ${runId}`, class: "artefact-img" })
    : el("pre", { id: "artefact-text" }, await blob.text());
  showDetail(el("h2", { id: "detail-title" }, `${a.name} · ${runId}`),
    el("p", {}, el("a", { href: url, download: `${runId}-${a.name}` }, "download")), body);
}

// The best kernel against the code it was derived from (its parent experience): a line diff.
async function showParentDiff(best) {
  const parent = best && best.parent_id
    ? await api(`/experiences/${encodeURIComponent(best.parent_id)}`).catch(() => null) : null;
  const show = !!(parent && best.code);
  $("run-diff-title").classList.toggle("hidden", !show);
  $("run-diff").classList.toggle("hidden", !show);
  if (!show) return;
  $("run-diff-title").textContent = `Against its parent ${parent.id} (${parent.summary || parent.status})`;
  $("run-diff").replaceChildren(...diffLines(parent.code || "", best.code).map(([op, line]) =>
    el("span", { class: op === "+" ? "add" : op === "-" ? "del" : "same" }, `${op} ${line}\n`)));
}

// Longest common subsequence of lines; past DIFF_MAX_CELLS it falls back to "all removed, all added".
const DIFF_MAX_CELLS = 4e6;
function diffLines(a, b) {
  const x = a.split("\n"), y = b.split("\n");
  const n = x.length, m = y.length;
  if (n * m > DIFF_MAX_CELLS) return [...x.map((l) => ["-", l]), ...y.map((l) => ["+", l])];
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
    lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([" ", x[i]]); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["-", x[i++]]);
    else out.push(["+", y[j++]]);
  }
  while (i < n) out.push(["-", x[i++]]);
  while (j < m) out.push(["+", y[j++]]);
  return out;
}

// -- a bootstrap (one run per task and target): its own address, its pairs, their runs compared -------------

function showOnly(view) {
  for (const id of ["run-view", "compare-view", "bootstrap-view"]) $(id).classList.toggle("hidden", id !== view);
}

async function openBootstrap(id) {
  if (state.stream) state.stream.abort();
  state.run = null;
  showOnly(null);
  const b = await guarded(() => api(`/bootstraps/${encodeURIComponent(id)}`));
  if (!b) return;
  showOnly("bootstrap-view");
  $("bootstrap-id").textContent = b.id;
  $("bootstrap-status").textContent = b.status;
  const y = b.yardsticks;
  $("bootstrap-summary").textContent = `${b.tasks.length} tasks × ${b.targets.length} targets, budget ${b.budget} each`
    + ` · median ${speed(y.median_over_competent)} over competent (${y.competent_pairs} pairs)`
    + (y.median_over_library ? ` · ${speed(y.median_over_library)} over the library (${y.library_pairs})` : "")
    + (b.executor ? ` · on ${b.executor}` : "");
  $("bootstrap-rows").replaceChildren(...b.rows.map((r) => el("tr", {},
    el("td", {}, r.task), el("td", {}, r.target),
    el("td", {}, el("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.run_id)),
    el("td", { class: statusClass(r.status) }, r.status), el("td", { class: "num" }, `${r.evaluations}/${r.budget}`),
    el("td", { class: "num" }, speeds(r.best_competent_speedup, r.best_speedup)))));
  $("bootstrap-compare").href = `#/compare/${b.rows.slice(0, 6).map((r) => encodeURIComponent(r.run_id)).join(",")}`;
  $("bootstrap-compare").classList.toggle("hidden", b.rows.length < 2);
}

// -- comparing runs side by side ---------------------------------------------------------------------------

const SERIES_COLOURS = ["#1f6feb", "#cf222e", "#2da44e", "#8250df", "#bf8700", "#0a7ea4"];

async function compareRuns(ids) {
  if (state.stream) state.stream.abort();
  state.run = null;
  showOnly(null);
  const runs = await guarded(() => Promise.all(ids.map((id) => api(`/runs/${encodeURIComponent(id)}`))));
  if (!runs) return;
  showOnly("compare-view");
  const rows = [["run", (r) => el("a", { href: `#/runs/${encodeURIComponent(r.id)}` }, r.id)], ["status", (r) => r.status],
    ["best: competent / -O3", (r) => speeds(r.best_competent_speedup, r.best_speedup)],
    ["evaluations", (r) => `${r.evaluations}/${r.budget}`],
    ...runParams(runs[0]).map(([k], i) => [k, (r) => String(runParams(r)[i][1])])];
  // Rows whose values differ between the runs stand out: what was changed between them.
  const differs = (f) => new Set(runs.map((r) => String(f(r).textContent ?? f(r)))).size > 1;
  $("compare-table").replaceChildren(el("tbody", {}, rows.map(([k, f]) => el("tr", { class: differs(f) ? "differs" : null }, el("th", {}, k),
    runs.map((r, i) => el("td", { class: "compare-cell", "data-run": r.id },
      k === "run" ? [el("span", { class: "swatch", "data-colour": SERIES_COLOURS[i % SERIES_COLOURS.length] }), f(r)] : f(r)))))));
  for (const s of $("compare-table").querySelectorAll(".swatch")) s.style.background = s.dataset.colour;
  drawSeries($("compare-plot"), runs.map((r, i) => ({ name: r.id, colour: SERIES_COLOURS[i % SERIES_COLOURS.length],
    points: r.history.map((v, j) => [j, v]), width: 2.5 })), Math.max(1, ...runs.map((r) => r.history.length)));
  $("compare-plot").dataset.series = String(runs.length);
}

async function cancelRun() {
  if (!state.run) return;
  const r = await guarded(() => api(`/runs/${encodeURIComponent(state.run.id)}`, { method: "DELETE" }));
  if (r) $("run-status").textContent = "cancelling";
}

// -- Cypher console (analyst and operator keys) ----------------------------------------------------------

async function loadSavedQueries() {
  const list = await guarded(() => api("/queries"));
  if (!list) return;
  state.queries = list.items;
  fillSelect($("saved-name"), list.items.map((q) => [q.name, `${q.name} · ${q.summary}`]), false);
  showSavedParams();
}

// Each saved query is a form: one input per declared parameter, typed and pre-filled with its default.
function showSavedParams() {
  const q = state.queries.find((x) => x.name === $("saved-name").value);
  $("saved-summary").textContent = q ? q.description : "";
  $("saved-params").replaceChildren(...(q ? q.params : []).map((p) => el("label", { class: "inline", title: p.description },
    `${p.name}${p.required ? " *" : ""} `,
    p.type === "bool"
      ? el("input", { type: "checkbox", "data-param": p.name, "data-type": p.type, checked: p.default === true })
      : el("input", { "data-param": p.name, "data-type": p.type, required: p.required,
        type: p.type === "int" || p.type === "float" ? "number" : "text", step: p.type === "float" ? "any" : null,
        value: p.default === null || p.default === undefined ? null : p.default, placeholder: p.type }))));
}

async function runSaved(event) {
  event.preventDefault();
  const params = {};
  for (const input of $("saved-params").querySelectorAll("input[data-param]")) {
    const t = input.dataset.type;
    if (t === "bool") params[input.dataset.param] = input.checked;
    else if (input.value !== "") params[input.dataset.param] = t === "int" || t === "float" ? Number(input.value) : input.value;
  }
  const name = $("saved-name").value;
  clearAnswer();
  const answer = await guarded(() => api(`/queries/${encodeURIComponent(name)}`, { json: { params } }));
  if (answer) showAnswer(answer);
}

async function runCypher(event) {
  event.preventDefault();
  const query = $("cypher-text").value;
  remember(query);
  clearAnswer();
  const answer = await guarded(() => api("/cypher", { json: { query } }));
  if (answer) showAnswer(answer);
}

// A refused or failed query leaves nothing of the previous answer on screen: the error stands alone.
function clearAnswer() {
  state.answer = null;
  $("cypher-summary").textContent = "";
  $("cypher-table").replaceChildren();
  $("cypher-plan").replaceChildren();
  $("graph-legend").replaceChildren();
  state.graph = null;
  const g = $("cypher-graph");
  g.replaceChildren();
  g.dataset.nodes = "0";
  g.dataset.relationships = "0";
}

function showAnswer(answer) {
  state.answer = answer;
  const more = answer.truncated ? ` · truncated at the row cap (${answer.row_cap}) or byte cap` : "";
  $("cypher-summary").textContent = `${answer.row_count} rows in ${Math.round(answer.elapsed_ms)} ms${more}`;
  const rows = answer.rows.map((row) => el("tr", {}, answer.columns.map((c) => el("td", {}, cell(row[c])))));
  $("cypher-table").replaceChildren(table("cypher-rows", answer.columns, rows));
  drawGraph(answer.rows);
}

function cell(v) {
  if (v === null || v === undefined) return "";
  if (typeof v !== "object") return String(v);
  if (v._labels) return `(:${v._labels.join(":")} ${v.id || v.key || v.name || v.sha || ""})`;
  if (v._type) return `[:${v._type}]`;
  return JSON.stringify(v);
}

// -- query history (this browser only) ---------------------------------------------------------------------

const HISTORY_STORE = "eok.cypherHistory";
const HISTORY_MAX = 50;

function historyItems() {
  try {
    const items = JSON.parse(localStorage.getItem(HISTORY_STORE) || "[]");
    return Array.isArray(items) ? items.filter((q) => typeof q === "string") : [];
  } catch (err) {
    return [];
  }
}

function remember(query) {
  const q = query.trim();
  if (!q) return;
  const items = [q, ...historyItems().filter((x) => x !== q)].slice(0, HISTORY_MAX);
  localStorage.setItem(HISTORY_STORE, JSON.stringify(items));
  showHistory();
}

function showHistory() {
  const items = historyItems();
  fillSelect($("cypher-history"), items.map((q) => [q, q.length > 90 ? `${q.slice(0, 89)}…` : q]));
  $("cypher-history").querySelector("option").textContent = `history (${items.length})`;
  $("cypher-history").value = "";
}

// -- export of the answer --------------------------------------------------------------------------------

function csvField(v) {
  let s = v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
  if (typeof v === "string" && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;  // a spreadsheet would run it as a formula
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

function answerText(kind) {
  const a = state.answer;
  if (kind === "json") return JSON.stringify({ columns: a.columns, rows: a.rows, truncated: a.truncated }, null, 2);
  return [a.columns.map(csvField).join(","), ...a.rows.map((r) => a.columns.map((c) => csvField(r[c])).join(","))]
    .join("\r\n") + "\r\n";
}

function exportAnswer(kind) {
  if (!state.answer) {
    showError(new Error("no answer to export: run a query first"));
    return;
  }
  const type = kind === "json" ? "application/json" : "text/csv";
  const link = $("export-link");
  if (link.href.startsWith("blob:")) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(new Blob([answerText(kind)], { type }));
  link.download = `eok-answer.${kind}`;
  link.dataset.kind = kind;
  link.click();
}

// -- schema sidebar and plan view --------------------------------------------------------------------------

async function loadSchema() {
  const s = await api("/graph/schema").catch(() => null);
  if (!s) return;
  const pick = (text) => () => { $("cypher-text").value = text; $("cypher-text").focus(); };
  $("schema-labels").replaceChildren(...Object.entries(s.labels).map(([label, n]) => el("li", {
    class: "clickable", title: `MATCH (n:${label}) RETURN n LIMIT 25`, onclick: pick(`MATCH (n:\`${label}\`) RETURN n LIMIT 25`) },
  el("span", { class: "dot", style: null, "data-label": label }), label, el("span", { class: "muted" }, ` ${n.toLocaleString()}`))));
  for (const dot of $("schema-labels").querySelectorAll(".dot")) dot.style.background = labelColour(dot.dataset.label);
  $("schema-types").replaceChildren(...Object.entries(s.relationship_types).map(([t, n]) => el("li", {
    class: "clickable", onclick: pick(`MATCH p = ()-[:\`${t}\`]->() RETURN p LIMIT 25`) },
  t, el("span", { class: "muted" }, ` ${n.toLocaleString()}`))));
  $("schema-keys").replaceChildren(...s.property_keys.map((k) => el("li", {}, k)));
}

// Explain: Neo4j's plan, nothing runs. Profile: the query runs (as Run does, same guard and limits) and each
// operator shows what Neo4j measured; the one with the most db hits is highlighted.
async function planCypher(profile) {
  const query = $("cypher-text").value;
  remember(query);
  clearAnswer();
  const out = await guarded(() => api("/cypher/plan", { json: { query, profile } }));
  if (!out) return;
  if (out.profiled) {
    let hits = 0;
    const walk = (op) => { hits += op.db_hits || 0; op.children.forEach(walk); };
    walk(out.plan);
    $("cypher-summary").textContent = `profiled: ${out.row_count} rows in ${Math.round(out.elapsed_ms)} ms`
      + ` · ${hits.toLocaleString()} db hits`;
  }
  $("cypher-plan").replaceChildren(el("ul", { class: "plan-tree" }, planNode(out.plan)));
  showView("plan");
}

// What PROFILE measured per operator, as the plan view labels it; a measure Neo4j did not report is left out.
const PLAN_MEASURES = [["rows", "rows"], ["db_hits", "db hits"], ["page_cache_hits", "page cache hits"],
  ["page_cache_misses", "misses"], ["memory_bytes", "bytes"], ["time_ms", "ms"]];

function planNode(op) {
  const measures = PLAN_MEASURES.filter(([k]) => op[k] !== null && op[k] !== undefined)
    .map(([k, label]) => el("span", { class: "measure", "data-measure": k }, `${op[k].toLocaleString()} ${label}`));
  return el("li", {},
    el("div", { class: op.slowest ? "op slowest" : "op", title: op.slowest ? "the most db hits of the plan" : null },
      el("strong", {}, op.operator),
      op.estimated_rows !== null ? el("span", { class: "muted" }, ` · est. ${op.estimated_rows} rows`) : null,
      measures, op.details ? el("code", {}, op.details) : null, op.cut ? el("em", { class: "muted" }, " (cut)") : null),
    op.children.length ? el("ul", {}, op.children.map(planNode)) : null);
}

// -- the graph view --------------------------------------------------------------------------------------

// Nodes (maps with _id and _labels) and relationships (_type, _start, _end) anywhere in the answer.
function collectGraph(value, nodes, rels) {
  if (Array.isArray(value)) { for (const v of value) collectGraph(v, nodes, rels); return; }
  if (!value || typeof value !== "object") return;
  if (value._labels && value._id) nodes.set(value._id, value);
  else if (value._type && value._start && value._end) rels.set(relKey(value), value);
  for (const v of Object.values(value)) if (v && typeof v === "object") collectGraph(v, nodes, rels);
}

const relKey = (r) => r._id || `${r._start}-${r._type}-${r._end}`;
const GRAPH_MAX_NODES = 150;
const GRAPH_W = 760, GRAPH_H = 460;
// One colour per label: the graph's own labels fixed, any other from the rest of the palette by name.
const LABEL_COLOURS = {
  Thought: "#1f6feb", Idea: "#8250df", Commit: "#6e7781", Experience: "#bf8700", Target: "#2da44e",
  Task: "#cf222e", Run: "#0a7ea4", Repository: "#9a6700", Bootstrap: "#e16f24",
};
const EXTRA_COLOURS = ["#d63384", "#1b7c83", "#7d4e00", "#5a32a3", "#116329", "#a40e26", "#4d2d00", "#0550ae"];

function labelColour(label) {
  if (LABEL_COLOURS[label]) return LABEL_COLOURS[label];
  let h = 0;
  for (const ch of label || "") h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return EXTRA_COLOURS[h % EXTRA_COLOURS.length];
}

function caption(n) {
  const v = n.title || n.name || n.id || n.key || (n.sha ? n.sha.slice(0, 10) : "") || n.summary || n._labels[0] || "";
  return String(v);
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function drawGraph(rows) {
  const nodes = new Map();
  const rels = new Map();
  collectGraph(rows, nodes, rels);
  const list = [...nodes.values()].slice(0, GRAPH_MAX_NODES);
  state.graph = { nodes: new Map(list.map((n) => [n._id, { data: n }])), rels, view: { x: 0, y: 0, k: 1 },
    dropped: nodes.size - list.length };
  layout(state.graph, [...state.graph.nodes.keys()]);
  fitView(state.graph);
  renderGraph();
  connectAnswerNodes(state.graph);
}

// Neo4j Browser connects the nodes of an answer: so does this view, by asking for the relationships among them.
async function connectAnswerNodes(graph) {
  const ids = [...graph.nodes.keys()];
  if (ids.length < 2) return;
  const found = await api("/graph/edges", { json: { ids: ids.slice(0, 300), limit: 1000 } }).catch(() => null);
  if (!found || state.graph !== graph) return;
  let added = 0;
  for (const r of found.relationships) if (!graph.rels.has(relKey(r))) { graph.rels.set(relKey(r), r); added++; }
  graph.edgesTruncated = found.truncated;
  if (added) { layout(graph, ids, 150); fitView(graph); }
  renderGraph();
}

// A force-directed layout: repulsion between every pair, springs along relationships, a pull to the centre.
function layout(graph, movable, iterations = 300) {
  const ids = [...graph.nodes.keys()];
  const n = ids.length;
  ids.forEach((id, i) => {
    const p = graph.nodes.get(id);
    if (p.x === undefined) {
      const a = (2 * Math.PI * i) / Math.max(1, n);
      p.x = GRAPH_W / 2 + 160 * Math.cos(a); p.y = GRAPH_H / 2 + 160 * Math.sin(a);
    }
  });
  const move = new Set(movable);
  const links = [...graph.rels.values()].filter((r) => graph.nodes.has(r._start) && graph.nodes.has(r._end));
  const ideal = Math.max(45, Math.min(110, 330 / Math.sqrt(Math.max(1, n))));  // denser when there are many
  for (let it = 0; it < iterations; it++) {
    const heat = 1 - it / iterations;
    const force = new Map(ids.map((id) => [id, [0, 0]]));
    for (let i = 0; i < n; i++) {
      const a = graph.nodes.get(ids[i]);
      for (let j = i + 1; j < n; j++) {
        const b = graph.nodes.get(ids[j]);
        let dx = a.x - b.x, dy = a.y - b.y;
        let d2 = dx * dx + dy * dy;
        if (d2 < 0.01) { dx = Math.random() - 0.5; dy = Math.random() - 0.5; d2 = 0.5; }
        const f = (ideal * ideal) / d2;
        force.get(ids[i])[0] += dx * f; force.get(ids[i])[1] += dy * f;
        force.get(ids[j])[0] -= dx * f; force.get(ids[j])[1] -= dy * f;
      }
    }
    for (const r of links) {
      const a = graph.nodes.get(r._start), b = graph.nodes.get(r._end);
      const dx = b.x - a.x, dy = b.y - a.y, d = Math.sqrt(dx * dx + dy * dy) || 1;
      const f = (d - ideal) / d * 0.5;
      force.get(r._start)[0] += dx * f; force.get(r._start)[1] += dy * f;
      force.get(r._end)[0] -= dx * f; force.get(r._end)[1] -= dy * f;
    }
    for (const id of ids) {
      if (!move.has(id)) continue;
      const p = graph.nodes.get(id), [fx, fy] = force.get(id);
      const gx = (GRAPH_W / 2 - p.x) * 0.06, gy = (GRAPH_H / 2 - p.y) * 0.06;
      const dx = fx * 0.1 + gx, dy = fy * 0.1 + gy, d = Math.sqrt(dx * dx + dy * dy) || 1;
      const step = Math.min(d, 30 * heat + 1);
      p.x += (dx / d) * step; p.y += (dy / d) * step;
    }
  }
}

// Every node on the canvas: scale and shift the view so the nodes' box (captions included) fits it.
function fitView(graph) {
  const ps = [...graph.nodes.values()];
  if (!ps.length) return;
  const xs = ps.map((p) => p.x), ys = ps.map((p) => p.y);
  const x0 = Math.min(...xs) - 30, x1 = Math.max(...xs) + 30, y0 = Math.min(...ys) - 25, y1 = Math.max(...ys) + 35;
  const k = Math.min(1.5, GRAPH_W / Math.max(1, x1 - x0), GRAPH_H / Math.max(1, y1 - y0));
  graph.view = { k, x: (GRAPH_W - k * (x0 + x1)) / 2, y: (GRAPH_H - k * (y0 + y1)) / 2 };
}

function renderGraph() {
  const graph = state.graph;
  const g = $("cypher-graph");
  if (!graph) return;
  const defs = svg("defs", {});
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 19, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }));
  defs.append(marker);
  const viewport = svg("g", { id: "graph-viewport", transform: `translate(${graph.view.x},${graph.view.y}) scale(${graph.view.k})` });
  const edges = svg("g", { class: "edges" }), dots = svg("g", { class: "nodes" });
  let drawn = 0;
  for (const r of graph.rels.values()) {
    const a = graph.nodes.get(r._start), b = graph.nodes.get(r._end);
    if (!a || !b) continue;
    drawn++;
    const line = svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "edge", "marker-end": "url(#arrow)", "data-type": r._type });
    line.append(svg("title", {}, r._type));
    edges.append(line, svg("text", { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 3, class: "edge-label" }, r._type));
  }
  const counts = new Map();
  for (const [id, p] of graph.nodes) {
    const label = p.data._labels[0] || "";
    counts.set(label, (counts.get(label) || 0) + 1);
    const full = caption(p.data);
    const short = full.length > 18 ? `${full.slice(0, 17)}…` : full;
    const node = svg("g", { class: "node", "data-id": id, "data-label": label, transform: `translate(${p.x},${p.y})` });
    node.append(svg("title", {}, `${p.data._labels.join(":")}: ${full}`),
      svg("circle", { r: 11, fill: labelColour(label), class: "dot" }),
      svg("text", { y: 24, class: "node-label", "text-anchor": "middle" }, short));
    dots.append(node);
  }
  viewport.append(edges, dots);
  g.replaceChildren(defs, svg("rect", { class: "backdrop", x: 0, y: 0, width: GRAPH_W, height: GRAPH_H }), viewport);
  if (!graph.nodes.size) g.append(svg("text", { x: 20, y: 30, class: "node-label" }, "no nodes in this answer"));
  g.dataset.nodes = String(graph.nodes.size);
  g.dataset.relationships = String(drawn);
  const notes = [graph.dropped > 0 ? `${graph.dropped} more nodes not drawn` : "",
    graph.edgesTruncated ? "more relationships than drawn" : ""].filter(Boolean);
  $("graph-legend").replaceChildren(...[...counts].sort().map(([label, n]) => el("span", { class: "legend-item", "data-label": label },
    el("span", { class: "dot", "data-colour": labelColour(label) }), `${label} (${n})`)),
  ...notes.map((t) => el("span", { class: "muted" }, t)));
  for (const dot of $("graph-legend").querySelectorAll(".dot")) dot.style.background = dot.dataset.colour;
}

// Pan (drag the background), zoom (wheel, around the pointer), drag a node, click to inspect, double-click to expand.
function wireGraph() {
  const g = $("cypher-graph");
  let drag = null;
  const toSvg = (ev) => {
    const box = g.getBoundingClientRect();
    return [((ev.clientX - box.left) * GRAPH_W) / box.width, ((ev.clientY - box.top) * GRAPH_H) / box.height];
  };
  g.addEventListener("mousedown", (ev) => {
    if (!state.graph) return;
    const node = ev.target.closest("g.node");
    const [sx, sy] = toSvg(ev);
    drag = { id: node ? node.dataset.id : null, sx, sy, moved: false, view: { ...state.graph.view } };
    ev.preventDefault();
  });
  window.addEventListener("mousemove", (ev) => {
    if (!drag || !state.graph) return;
    const [sx, sy] = toSvg(ev);
    const dx = sx - drag.sx, dy = sy - drag.sy;
    if (Math.abs(dx) + Math.abs(dy) > 2) drag.moved = true;
    if (!drag.moved) return;
    const v = state.graph.view;
    if (drag.id) {
      const p = state.graph.nodes.get(drag.id);
      p.x = (sx - v.x) / v.k; p.y = (sy - v.y) / v.k;
    } else {
      v.x = drag.view.x + dx; v.y = drag.view.y + dy;
    }
    renderGraph();
  });
  window.addEventListener("mouseup", () => {
    if (drag && drag.id && !drag.moved) inspectNode(drag.id);
    drag = null;
  });
  g.addEventListener("dblclick", (ev) => {
    const node = ev.target.closest("g.node");
    if (node) expandNode(node.dataset.id);
  });
  g.addEventListener("wheel", (ev) => {
    if (!state.graph) return;
    ev.preventDefault();
    const [sx, sy] = toSvg(ev);
    const v = state.graph.view;
    const k = Math.min(8, Math.max(0.1, v.k * (ev.deltaY < 0 ? 1.15 : 1 / 1.15)));
    v.x = sx - ((sx - v.x) * k) / v.k; v.y = sy - ((sy - v.y) * k) / v.k; v.k = k;
    renderGraph();
  }, { passive: false });
}

function inspectNode(id) {
  const p = state.graph && state.graph.nodes.get(id);
  if (!p) return;
  const props = Object.entries(p.data).filter(([k]) => !k.startsWith("_"));
  const rels = [...state.graph.rels.values()].filter((r) => r._start === id || r._end === id);
  showDetail(
    el("h2", { id: "detail-title" }, caption(p.data)),
    el("div", { class: "meta" }, p.data._labels.map((l) => el("span", { class: "chip", "data-label": l }, l))),
    el("h3", {}, `Properties (${props.length})`),
    table("node-properties", ["key", "value"], props.map(([k, v]) => el("tr", {},
      el("td", {}, el("code", {}, k)), el("td", {}, typeof v === "string" && v.includes("\n") ? el("pre", {}, v) : cell(v))))),
    el("h3", {}, `Relationships drawn (${rels.length})`),
    rels.length ? el("ul", {}, rels.map((r) => el("li", {}, r._start === id
      ? `-[:${r._type}]-> ${caption(state.graph.nodes.get(r._end).data)}`
      : `<-[:${r._type}]- ${caption(state.graph.nodes.get(r._start).data)}`))) : null,
    el("p", {}, el("button", { class: "secondary", type: "button", onclick: () => expandNode(id) }, "Expand neighbours")),
    el("p", { class: "muted" }, `element id ${id}`),
  );
}

async function expandNode(id) {
  const graph = state.graph;
  const got = await guarded(() => api(`/graph/neighbours?${new URLSearchParams({ id, limit: "25" })}`));
  if (!got || state.graph !== graph) return;
  const centre = graph.nodes.get(id);
  const fresh = got.nodes.filter((n) => !graph.nodes.has(n._id)).slice(0, Math.max(0, GRAPH_MAX_NODES - graph.nodes.size));
  fresh.forEach((n, i) => {
    const a = (2 * Math.PI * i) / Math.max(1, fresh.length);
    graph.nodes.set(n._id, { data: n, x: centre.x + 90 * Math.cos(a), y: centre.y + 90 * Math.sin(a) });
  });
  for (const r of got.relationships) graph.rels.set(relKey(r), r);
  layout(graph, fresh.map((n) => n._id), 120);
  fitView(graph);
  renderGraph();
}

function showView(which) {
  $("cypher-table").classList.toggle("hidden", which !== "table");
  $("cypher-graph-box").classList.toggle("hidden", which !== "graph");
  $("cypher-plan").classList.toggle("hidden", which !== "plan");
  if (which === "graph" && state.graph) renderGraph();
}

// -- plots: best speedup over evaluations --------------------------------------------------------------------

const DIRECTION_COLOURS = ["#cf222e", "#2da44e", "#8250df", "#bf8700", "#0a7ea4", "#e16f24", "#d63384", "#57606a"];

// Axes, grid and the baseline at 1×; answers the scales for what is drawn on top.
function plotFrame(canvas, n, values) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, L = 52, R = 16, T = 18, B = 36;
  ctx.clearRect(0, 0, W, H);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, W, H);
  const vs = [1, ...values].filter((v) => v !== null && v !== undefined);
  const hi = Math.max(...vs) * 1.1, lo = Math.min(0.8, Math.min(...vs) * 0.95);
  const x = (i) => L + ((W - L - R) * (i + 1)) / n;
  const y = (v) => T + (H - T - B) * (1 - (v - lo) / (hi - lo));
  ctx.strokeStyle = "#dfe3e8";
  ctx.fillStyle = "#667085";
  ctx.font = "11px system-ui, sans-serif";
  ctx.lineWidth = 1;
  const tick = niceStep((hi - lo) / 6);
  for (let v = Math.ceil(lo / tick) * tick; v <= hi; v += tick) {
    ctx.beginPath(); ctx.moveTo(L, y(v)); ctx.lineTo(W - R, y(v)); ctx.stroke();
    ctx.fillText(`${v.toFixed(tick < 0.1 ? 2 : 1)}×`, 6, y(v) + 4);
  }
  const step = Math.max(1, Math.ceil(n / 10));
  for (let i = 0; i < n; i += step) ctx.fillText(String(i + 1), x(i) - 3, H - B + 16);
  ctx.fillText("evaluations", W / 2 - 28, H - 6);
  ctx.setLineDash([4, 4]);
  ctx.strokeStyle = "#9a6700";
  ctx.beginPath(); ctx.moveTo(L, y(1)); ctx.lineTo(W - R, y(1)); ctx.stroke();
  ctx.setLineDash([]);
  ctx.fillStyle = "#9a6700";
  ctx.fillText("baseline", W - R - 48, y(1) - 4);
  return { ctx, x, y, lo, W, L, R, T };
}

// A step line through [index, value] points (nulls skipped), and a legend entry per named series.
function stepLine(f, points, colour, width) {
  const { ctx, x, y } = f;
  ctx.strokeStyle = colour;
  ctx.lineWidth = width;
  ctx.beginPath();
  let last = null;
  for (const [i, v] of points) {
    if (v === null || v === undefined) continue;
    if (last === null) ctx.moveTo(x(i), y(v)); else { ctx.lineTo(x(i), y(last)); ctx.lineTo(x(i), y(v)); }
    last = v;
  }
  ctx.stroke();
}

function legend(f, entries) {
  const { ctx, W, R, T } = f;
  ctx.font = "11px system-ui, sans-serif";
  entries.forEach(([name, colour], i) => {
    const text = name.length > 28 ? `${name.slice(0, 27)}…` : name;
    const yy = T + 4 + 14 * i, xx = W - R - 190;
    ctx.fillStyle = colour; ctx.fillRect(xx, yy - 8, 10, 3);
    ctx.fillStyle = "#344054"; ctx.fillText(text, xx + 14, yy - 3);
  });
}

function drawSeries(canvas, series, n) {
  const f = plotFrame(canvas, n, series.flatMap((s) => s.points.map((p) => p[1])));
  for (const s of series) stepLine(f, s.points, s.colour, s.width);
  legend(f, series.map((s) => [s.name, s.colour]));
}

function drawPlot() {
  const canvas = $("run-plot");
  const run = state.run || { points: [], best: [], dirs: new Map(), budget: 0 };
  const n = Math.max(run.budget, run.best.length, 1);
  const f = plotFrame(canvas, n, [...run.best, ...run.points]);
  const { ctx, x, y, lo, L, T } = f;
  ctx.fillStyle = "rgba(31,111,235,.35)";
  run.points.forEach((v, i) => {
    if (v === null || v === undefined) return;
    ctx.beginPath(); ctx.arc(x(i), y(v), 3.5, 0, 2 * Math.PI); ctx.fill();
  });
  ctx.fillStyle = "#c62828";
  run.points.forEach((v, i) => {
    if (v === null || v === undefined) ctx.fillRect(x(i) - 3, y(lo) - 6, 6, 6);
  });
  // Each direction's own best so far (thin), then the run's best (thick, blue) over them.
  const dirs = [...run.dirs.entries()];
  dirs.forEach(([, points], i) => stepLine(f, points, DIRECTION_COLOURS[i % DIRECTION_COLOURS.length], 1.5));
  stepLine(f, run.best.map((v, i) => [i, v]), "#1f6feb", 2.5);
  if (dirs.length > 1) legend(f, dirs.map(([name], i) => [name, DIRECTION_COLOURS[i % DIRECTION_COLOURS.length]]));
  canvas.dataset.directions = String(dirs.length);
  ctx.fillStyle = "#1d232b";
  ctx.font = "600 12px system-ui, sans-serif";
  ctx.fillText(dirs.length > 1 ? "best speedup so far, overall (blue) and per direction" : "best speedup so far", L + 6, T + 2);
}

function niceStep(raw) {
  const power = 10 ** Math.floor(Math.log10(raw));
  const unit = [1, 2, 2.5, 5, 10].find((m) => m * power >= raw);
  return unit * power;
}

// -- wiring -------------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", useKey);
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => switchTab(tab));
  $("search-form").addEventListener("submit", search);
  $("exp-form").addEventListener("submit", (ev) => listExperiences(ev));
  $("exp-more").addEventListener("click", () => listExperiences(null, true));
  $("run-form").addEventListener("submit", startRun);
  $("run-cancel").addEventListener("click", cancelRun);
  $("detail-close").addEventListener("click", () => $("detail").classList.add("hidden"));
  $("saved-name").addEventListener("change", showSavedParams);
  $("saved-form").addEventListener("submit", runSaved);
  $("cypher-form").addEventListener("submit", runCypher);
  $("view-table").addEventListener("click", () => showView("table"));
  $("view-graph").addEventListener("click", () => showView("graph"));
  $("view-plan").addEventListener("click", () => showView("plan"));
  $("cypher-explain").addEventListener("click", () => planCypher(false));
  $("cypher-profile").addEventListener("click", () => planCypher(true));
  $("cypher-history").addEventListener("change", (ev) => { if (ev.target.value) $("cypher-text").value = ev.target.value; });
  $("export-csv").addEventListener("click", () => exportAnswer("csv"));
  $("export-json").addEventListener("click", () => exportAnswer("json"));
  $("compare-go").addEventListener("click", () => {
    location.hash = `#/compare/${[...state.compare].map(encodeURIComponent).join(",")}`;
  });
  window.addEventListener("hashchange", route);
  wireGraph();
  showHistory();
  applyRole(null);
  drawPlot();
  loadHealth();
  loadCatalog();
});
