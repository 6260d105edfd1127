// The compare view: two runs of the same question side by side, turns aligned by index, with their metrics.
"use strict";

const CMP_ROWS = [["status", "verdict"], ["answer", "answer"], ["stop", "stop reason"], ["turns", "turns"],
  ["tokens", "tokens"], ["wall_s", "wall s"], ["search", "#search"], ["select", "#select"], ["extract", "#extract"],
  ["revisit", "revisit"], ["docs", "documents"]];

function compactTurn(run, t, base) {
  if (!t) return el("td", { class: "empty" }, "");
  const msg = (t.model && t.model.message) || {};
  return el("td", {},
    el("a", { href: "#/run/" + run.row.key + "/turn/" + t.n, class: "muted small" }, "turn " + t.n),
    t.edits.map((e) => el("div", { class: "note context_edit small" }, "context edit (" + e.strategy + "): " +
      (e.cleared || []).length + " call(s) cleared, ~" + fmt(e.tokens_before) + " → ~" + fmt(e.tokens_after) + " tokens")),
    msg.content ? el("div", { class: "assistant small" }, short(msg.content, 300)) : null,
    t.calls.map((c) => el("div", { class: "call small" + (c.error ? " err" : "") },
      el("span", { class: "tool" }, c.name), " ", el("code", {}, short(argsText(c), 200)), callFlags(c),
      textBlock(c.observation, { label: "observation", maxChars: 400, maxLines: 6, cls: "obs" }))),
    t.notes.map((n) => el("div", { class: "note " + n.type }, n.type + ": " + short(n.message, 200))));
}

FTE.views.compare = async function (index, ka, kb) {
  const [a, b] = await Promise.all([load("run/" + ka), load("run/" + kb)]);
  crumbs(el("a", { href: "#/run/" + ka }, short(a.row.question || a.row.path, 50)), "compare");
  const ta = turnsOf(a.events).turns, tb = turnsOf(b.events).turns;
  const head = el("tr", {}, el("th", {}, ""), [a, b].map((r) => el("th", {}, el("a", { href: "#/run/" + r.row.key }, r.row.arm + " r" + r.row.rep),
    el("div", { class: "muted small" }, r.row.model || ""))));
  const metrics = CMP_ROWS.map(([k, label]) => el("tr", {}, el("th", {}, label), [a, b].map((r) =>
    el("td", { class: typeof r.row[k] === "number" ? "num" : "" }, k === "status" ? badge(r.row.status) : k === "revisit" ? pct(r.row.revisit) : fmt(r.row[k])))));
  const n = Math.max(ta.length, tb.length);
  const rows = [];
  for (let i = 0; i < n; i++) rows.push(el("tr", { class: "aligned" }, el("th", { class: "num" }, String(i + 1)), compactTurn(a, ta[i]), compactTurn(b, tb[i])));
  show("compare", el("h2", {}, "Compare"), el("p", { class: "question" }, a.row.question || ""),
    el("p", {}, "gold answer: ", el("b", {}, a.gold === null || a.gold === undefined ? "–" : String(a.gold))),
    el("table", { class: "cmp", id: "cmp-metrics" }, el("thead", {}, head), el("tbody", {}, metrics)),
    el("h3", {}, "Turns, aligned by index"),
    el("table", { class: "cmp turns", id: "cmp-turns" }, el("thead", {}, el("tr", {}, el("th", {}, "#"),
      el("th", {}, a.row.arm), el("th", {}, b.row.arm))), el("tbody", {}, rows)));
};
