// The run view: question, gold answer and verdict; then every turn (the context edit made before its model
// call, if any; reasoning collapsed, assistant text, each tool call with its arguments and observation —
// flagged when a later edit cleared it —, nudges and errors, tokens and latency); the answer.
"use strict";

function turnsOf(events) {
  const turns = new Map();
  const get = (n) => { if (!turns.has(n)) turns.set(n, { n, model: null, calls: [], notes: [], edits: [] }); return turns.get(n); };
  let start = null, end = null;
  const clearedAt = new Map(); // tool call id -> the turn of the first edit that cleared it
  for (const e of events) {
    if (e.type === "start") start = e;
    else if (e.type === "end") end = e;
    else if (e.type === "model_call") get(e.turn || 0).model = e;
    else if (e.type === "tool_call") get(e.turn || 0).calls.push(e);
    else if (e.type === "nudge" || e.type === "error") get(e.turn || 0).notes.push(e);
    else if (e.type === "context_edit") {
      get(e.turn || 0).edits.push(e);
      for (const id of e.cleared || []) if (!clearedAt.has(id)) clearedAt.set(id, e.turn || 0);
    }
  }
  return { start, end, clearedAt, turns: [...turns.values()].sort((a, b) => a.n - b.n) };
}

function argsText(call) {
  const a = call.arguments;
  if (a && typeof a === "object" && typeof a.command === "string" && Object.keys(a).length === 1) return a.command;
  if (a && typeof a === "object") return JSON.stringify(a, null, 1);
  return call.raw_arguments || "";
}

function turnLink(key, n, text, cls) { return el("a", { href: "#/run/" + key + "/turn/" + n, class: cls }, text); }

function callFlags(call, ctx) {
  const m = call.meta || {}, f = [];
  if (ctx && ctx.clearedAt.has(call.id)) {
    const t = ctx.clearedAt.get(call.id);
    f.push(["cleared", turnLink(ctx.key, t, "cleared at turn " + t, "clearedlink")]);
  }
  if (call.error) f.push(["error", "error"]);
  if (m.exit_code !== undefined && m.exit_code !== null && m.exit_code !== 0) f.push(["warn", "exit " + m.exit_code]);
  if (m.timed_out) f.push(["error", "timed out"]);
  if (m.truncated) f.push(["warn", "truncated"]);
  if (m.restarted) f.push(["warn", "shell restarted"]);
  if (m.new === false) f.push(["warn", "already fetched"]);
  return f.map(([c, t]) => el("span", { class: "flag " + c }, t));
}

function docLinks(run, callIndex) {
  const out = [];
  for (const d of run.workspace) {
    const t = d.touches.find((x) => x.call === callIndex);
    if (!t) continue;
    const line = (t.hits[0] || t.lines[0]);
    out.push(el("a", { class: "doclink " + t.op, href: "#/run/" + run.row.key + "/ws/" + d.n + (line ? "/" + line : "") },
      t.op + " " + d.name + (t.hits.length ? " (" + t.hits.length + " hit" + (t.hits.length > 1 ? "s" : "") + ")" : "")));
  }
  return out.length ? el("div", { class: "doclinks" }, "workspace: ", out) : null;
}

function renderCall(run, call, index, ctx) {
  return el("div", { class: "call" + (call.error ? " err" : ""), dataset: { call: index } },
    el("div", { class: "callhead" }, el("span", { class: "tool" }, call.name || "?"),
      el("span", { class: "muted small" }, " " + fmt(call.duration_s, 2) + " s "), callFlags(call, ctx)),
    el("pre", { class: "args" }, argsText(call)),
    textBlock(call.observation, { label: "observation", cls: "obs" }),
    docLinks(run, index));
}

// A context edit: what the strategy sent instead of the whole conversation, and the calls it cleared
// (each a link to its turn).
function renderEdit(e, ctx) {
  const cleared = (e.cleared || []).map((id) => ctx.callTurn.has(id)
    ? turnLink(ctx.key, ctx.callTurn.get(id), id + " (turn " + ctx.callTurn.get(id) + ")", "cleared") : el("span", { class: "cleared" }, id));
  return el("div", { class: "note context_edit" }, el("b", {}, "context edit (" + (e.strategy || "?") + "): "),
    fmt(e.messages_before) + " → " + fmt(e.messages_after) + " messages, ~" + fmt(e.tokens_before) + " → ~" + fmt(e.tokens_after) + " tokens",
    cleared.length ? el("div", { class: "small" }, cleared.length + " tool call(s) cleared: ", cleared.flatMap((c, i) => (i ? [", ", c] : [c]))) : null,
    e.note ? el("div", { class: "small muted" }, String(e.note)) : null);
}

function renderTurn(run, t, callBase, ctx) {
  const m = t.model || {};
  const u = m.usage || {};
  const msg = m.message || {};
  const head = el("div", { class: "turnhead" }, el("b", {}, "Turn " + t.n),
    el("span", { class: "muted small" }, " · " + fmt(u.prompt_tokens) + " prompt + " + fmt(u.completion_tokens) +
      " completion tokens · " + fmt(m.latency_s, 2) + " s" + (m.finish_reason ? " · " + m.finish_reason : "") +
      (m.attempts > 1 ? " · " + m.attempts + " attempts" : "")));
  const parts = [head, ...t.edits.map((e) => renderEdit(e, ctx))];
  if (m.reasoning) parts.push(textBlock(m.reasoning, { label: "reasoning", collapsed: true, cls: "reasoning" }));
  if (msg.content) parts.push(textBlock(msg.content, { label: "assistant", cls: "assistant" }));
  t.calls.forEach((c, i) => parts.push(renderCall(run, c, callBase + i, ctx)));
  for (const n of t.notes) parts.push(el("div", { class: "note " + n.type }, el("b", {}, n.type + ": "), String(n.message || "")));
  return el("section", { class: "turn" + (t.edits.length ? " edited" : ""), id: "turn-" + t.n }, parts);
}

// The hand check: the latest mark of the run (who, when, note), and — when served with the session
// token — buttons that append a new one. The note is shown as text, like everything else.
function handCheck(run) {
  const marks = run.audit || [];
  const last = marks[marks.length - 1];
  const shown = last
    ? el("span", { id: "hand-mark", class: "hand" }, badge(last.mark), " by " + last.who + ", " + last.at,
      last.judge_correct === null || last.judge_correct === undefined ? "" : " (the judge said " + (last.judge_correct ? "correct" : "wrong") + ")",
      last.note ? el("div", { id: "hand-note", class: "note" }, last.note) : null,
      marks.length > 1 ? el("span", { class: "muted small" }, " · " + marks.length + " marks, the latest counts") : null)
    : el("span", { id: "hand-mark", class: "muted" }, "not checked by hand");
  if (!FTE.token) return el("td", {}, shown, el("span", { class: "muted small", id: "hand-readonly" }, " (read-only)"));
  const note = el("input", { id: "hand-note-input", type: "text", maxlength: "2000", placeholder: "note (optional)" });
  const status = el("span", { id: "hand-status", class: "muted small" });
  const send = (mark) => async () => {
    status.textContent = "saving…";
    try {
      const r = await fetch("api/audit", {
        method: "POST", headers: { "Content-Type": "application/json", "X-FTE-Token": FTE.token },
        body: JSON.stringify({ key: run.row.key, mark: mark, note: note.value }),
      });
      if (!r.ok) throw new Error(await r.text());
      delete FTE.cache["run/" + run.row.key];
      delete FTE.cache["index"];
      queueRoute();
    } catch (e) {
      status.textContent = "not saved: " + (e && e.message ? e.message : e);
    }
  };
  return el("td", {}, shown, el("div", { class: "handctl" },
    el("button", { id: "mark-correct", type: "button", onclick: send("correct") }, "answer is correct"), " ",
    el("button", { id: "mark-wrong", type: "button", onclick: send("wrong") }, "answer is wrong"), " ", note, " ", status));
}

function verdict(run) {
  const r = run.row;
  return el("table", { class: "facts" }, el("tbody", {},
    el("tr", {}, el("th", {}, "question"), el("td", { class: "question" }, r.question || "–")),
    el("tr", {}, el("th", {}, "gold answer"), el("td", { id: "gold" }, run.gold === null || run.gold === undefined ? "–" : String(run.gold))),
    el("tr", {}, el("th", {}, "answer"), el("td", { id: "answer" }, r.answer === null || r.answer === undefined ? "(no answer)" : String(r.answer))),
    el("tr", {}, el("th", {}, "verdict"), el("td", {}, badge(r.status), " stop reason: " + r.stop + (run.f1 !== null && run.f1 !== undefined ? " · F1 " + fmt(run.f1, 2) : ""),
      run.result && run.result.error ? el("div", { class: "error" }, String(run.result.error)) : null)),
    el("tr", {}, el("th", {}, "hand check"), handCheck(run))));
}

function metricsLine(r) {
  return el("p", { class: "metrics" }, r.arm + " · " + (r.model || "?") + " · r" + r.rep + " · " + fmt(r.turns) + " turns · " +
    (r.edits ? r.edits + " context edit(s) · " : "") +
    fmt(r.tokens) + " tokens · " + fmt(r.wall_s) + " s · #search " + r.search + " · #select " + r.select + " · #extract " +
    r.extract + " · revisit " + pct(r.revisit) + " · " + r.docs + " documents");
}

// A fork (fte-shell fork, bench --fork-from): its parent, the turns replayed from it and whether the
// replayed state matched; a parent: its forks among the runs viewed.
function forkLine(run) {
  const f = run.forks || {}, p = f.parent, kids = f.children || [];
  if (!p && !kids.length) return null;
  const link = (key, text) => (key === null || key === undefined ? el("span", {}, text) : el("a", { href: "#/run/" + key }, text));
  return el("p", { class: "forks", id: "forks" },
    p ? ["forked from ", link(p.key, p.run_dir), " at turn " + p.turn + ": turns 1–" + p.turn +
      " replayed without the model, " + (p.equal === true ? "state equal to the parent's" : p.equal === false ? "state DIFFERS from the parent's" : "not checked")] : null,
    p && kids.length ? " · " : null,
    kids.length ? ["forks: ", kids.map((c) => [link(c.key, c.path + " (turn " + c.turn + (c.equal === false ? ", differs" : "") + ")"), " "])] : null);
}

function siblingsPicker(index, key, qid) {
  const sib = index.runs.filter((r) => r.qid === qid && r.key !== key);
  if (!sib.length) return null;
  return el("span", { class: "compare" }, " compare with: ",
    sib.map((r) => el("a", { href: "#/compare/" + key + "/" + r.key, class: "sib" }, r.arm + " r" + r.rep)));
}

FTE.views.run = async function (index, key, opts) {
  const run = await load("run/" + key);
  const r = run.row;
  const { start, end, turns, clearedAt } = turnsOf(run.events);
  const callTurn = new Map(turns.flatMap((t) => t.calls.map((c) => [c.id, t.n])));
  crumbs(el("a", { href: "#/run/" + key }, short(r.question || r.path, 60)));
  let base = 0;
  const sections = turns.map((t) => { const s = renderTurn(run, t, base, { clearedAt, callTurn, key }); base += t.calls.length; return s; });
  const step = (k, label) => (k >= 0 && k < index.runs.length ? el("a", { href: "#/run/" + k, class: "step" }, label) : null);
  const nav = el("p", { class: "nav" }, step(key - 1, "← previous run"), step(key + 1, "next run →"), " ",
    el("a", { href: "#/run/" + key + "/ws", id: "ws-link" }, "workspace (" + run.workspace.length + " documents)"),
    siblingsPicker(index, key, r.qid), location.protocol.startsWith("http") ? el("span", { class: "raw" }, " · raw: ",
      ["trajectory.jsonl", "result.json"].map((f) => el("a", { href: "files/" + r.root + "/" + (r.path === "." ? "" : r.path + "/") + f, class: "rawlink" }, f + " "))) : null);
  const endBox = end ? el("section", { class: "turn end" }, el("b", {}, "End: " + end.stop_reason), " after " + end.turns + " turns, " +
    fmt(end.wall_s) + " s", el("pre", { class: "text final" }, end.answer === null || end.answer === undefined ? "(no answer)" : String(end.answer)))
    : el("section", { class: "turn end" }, el("b", {}, "No end event"), " (the run did not finish: " + r.stop + ")");
  show("run", el("h2", {}, "Run ", el("span", { class: "muted" }, r.path)), verdict(run), metricsLine(r), forkLine(run), nav,
    start && start.system_prompt ? textBlock(start.system_prompt, { label: "system prompt", collapsed: true }) : null,
    el("div", { id: "turns" }, sections), endBox);
  if (opts.turn !== null && opts.turn !== undefined) {
    const t = document.getElementById("turn-" + opts.turn);
    if (t) { t.classList.add("target"); t.scrollIntoView(); }
  }
};
