// EoK page: vanilla JS, no build step, no third-party code. Everything shown comes from the API; text is
// always inserted as text (never as HTML) because titles, code and feedback come from mined repositories.
"use strict";

const KEY_STORE = "eok.apiKey";
const state = { cursor: null, run: null, stream: null, vocab: null, role: null, queries: [], answer: null };
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
    if (ROLES[state.role] >= ROLES.analyst) loadSavedQueries();
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
    class: "clickable", onclick: () => { switchTab($("tab-runs")); watchRun(r.id); } },
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
  const list = await api("/runs?limit=10").catch(() => null);
  if (!list) return;
  $("runs-rows").replaceChildren(...list.items.map((r) => el("tr", { class: "clickable", onclick: () => watchRun(r.id) },
    el("td", {}, el("code", {}, r.id)), el("td", {}, r.task_id), el("td", {}, r.target_key),
    el("td", { class: statusClass(r.status) }, r.status), el("td", { class: "num" }, `${r.evaluations}/${r.budget}`),
    el("td", { class: "num" }, speeds(r.best_competent_speedup, r.best_speedup)
      + overLibrary(r.best_speedup_over_library, r.library_label)))));
}

async function startRun(event) {
  event.preventDefault();
  const body = {
    task: $("run-task").value, target: $("run-target").value, budget: Number($("run-budget").value),
    directions: Number($("run-directions").value), generator: $("run-generator").value,
  };
  const accepted = await guarded(() => api("/runs", { json: body }));
  if (accepted) watchRun(accepted.id);
}

function resetRunView(id) {
  state.run = { id, points: [], best: [], budget: 0, done: false };
  $("run-view").classList.remove("hidden");
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
  const answer = await guarded(() => api(`/queries/${encodeURIComponent(name)}`, { json: { params } }));
  if (answer) showAnswer(answer);
}

async function runCypher(event) {
  event.preventDefault();
  const answer = await guarded(() => api("/cypher", { json: { query: $("cypher-text").value } }));
  if (answer) showAnswer(answer);
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

// Nodes (maps with _id and _labels) and relationships (_type, _start, _end) anywhere in the answer.
function collectGraph(value, nodes, rels) {
  if (Array.isArray(value)) { for (const v of value) collectGraph(v, nodes, rels); return; }
  if (!value || typeof value !== "object") return;
  if (value._labels && value._id) nodes.set(value._id, value);
  else if (value._type && value._start && value._end) rels.push(value);
  for (const v of Object.values(value)) if (v && typeof v === "object") collectGraph(v, nodes, rels);
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
  const rels = [];
  collectGraph(rows, nodes, rels);
  const g = $("cypher-graph");
  const list = [...nodes.values()].slice(0, 120);
  const W = 760, H = 460, cx = W / 2, cy = H / 2, radius = Math.min(W, H) / 2 - 50;
  const at = new Map(list.map((n, i) => {
    const a = (2 * Math.PI * i) / Math.max(1, list.length);
    return [n._id, [cx + radius * Math.cos(a), cy + radius * Math.sin(a)]];
  }));
  const parts = [];
  for (const r of rels) {
    const a = at.get(r._start), b = at.get(r._end);
    if (!a || !b) continue;
    parts.push(svg("line", { x1: a[0], y1: a[1], x2: b[0], y2: b[1], class: "edge" }));
    parts.push(svg("text", { x: (a[0] + b[0]) / 2, y: (a[1] + b[1]) / 2, class: "edge-label" }, r._type));
  }
  for (const n of list) {
    const [x, y] = at.get(n._id);
    const label = n._labels[0] || "";
    parts.push(svg("circle", { cx: x, cy: y, r: 9, class: `node node-${label}`, "data-id": n._id }));
    parts.push(svg("text", { x: x + 12, y: y + 4, class: "node-label" },
      `${label}: ${String(n.title || n.id || n.key || n.name || n.sha || "").slice(0, 28)}`));
  }
  if (!list.length) parts.push(svg("text", { x: 20, y: 30, class: "node-label" }, "no nodes in this answer"));
  g.replaceChildren(...parts);
  g.dataset.nodes = String(list.length);
  g.dataset.relationships = String(rels.filter((r) => at.has(r._start) && at.has(r._end)).length);
}

function showView(which) {
  $("cypher-table").classList.toggle("hidden", which !== "table");
  $("cypher-graph").classList.toggle("hidden", which !== "graph");
}

// -- the plot: best speedup over evaluations (line) and each passing candidate (dots) ----------------

function drawPlot() {
  const canvas = $("run-plot");
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, L = 52, R = 16, T = 18, B = 36;
  ctx.clearRect(0, 0, W, H);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, W, H);
  const run = state.run || { points: [], best: [], budget: 0 };
  const n = Math.max(run.budget, run.best.length, 1);
  const values = [1, ...run.best, ...run.points].filter((v) => v !== null && v !== undefined);
  const hi = Math.max(...values) * 1.1, lo = Math.min(0.8, Math.min(...values) * 0.95);
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

  ctx.fillStyle = "rgba(31,111,235,.35)";
  run.points.forEach((v, i) => {
    if (v === null || v === undefined) return;
    ctx.beginPath(); ctx.arc(x(i), y(v), 3.5, 0, 2 * Math.PI); ctx.fill();
  });
  ctx.fillStyle = "#c62828";
  run.points.forEach((v, i) => {
    if (v === null || v === undefined) ctx.fillRect(x(i) - 3, y(lo) - 6, 6, 6);
  });
  ctx.strokeStyle = "#1f6feb";
  ctx.lineWidth = 2.5;
  ctx.beginPath();
  let started = false;
  run.best.forEach((v, i) => {
    if (v === null || v === undefined) return;
    if (!started) { ctx.moveTo(x(i), y(v)); started = true; } else { ctx.lineTo(x(i), y(run.best[i - 1] ?? v)); ctx.lineTo(x(i), y(v)); }
  });
  ctx.stroke();
  ctx.fillStyle = "#1d232b";
  ctx.font = "600 12px system-ui, sans-serif";
  ctx.fillText("best speedup so far", L + 6, T + 2);
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
  applyRole(null);
  drawPlot();
  loadHealth();
  loadCatalog();
});
