// The sweep view: a question × arm matrix (correct / wrong / failed; an arm is a profile, or a profile ·
// context strategy when the sweep compares strategies) and every run in one table, filter and sort on any column.
"use strict";

const COLUMNS = [
  ["question", "question", "s"], ["profile", "profile", "s"], ["model", "model", "s"], ["rep", "rep", "n"],
  ["status", "verdict", "s"], ["stop", "stop reason", "s"], ["turns", "turns", "n"], ["tokens", "tokens", "n"],
  ["wall_s", "wall s", "n"], ["search", "#search", "n"], ["select", "#select", "n"], ["extract", "#extract", "n"],
  ["revisit", "revisit", "n"], ["context", "context", "s"], ["edits", "edits", "n"], ["hand", "hand check", "s"],
];
const SWEEP = { sort: null, dir: 1, filters: {}, limit: 200 };

function matches(row, filters) {
  for (const [col, f] of Object.entries(filters)) {
    if (!f) continue;
    const v = row[col];
    const m = /^\s*(<=|>=|<|>|=)\s*(-?[\d.]+)\s*$/.exec(f);
    if (m && typeof v === "number") {
      const x = +m[2];
      const ok = { "<": v < x, ">": v > x, "<=": v <= x, ">=": v >= x, "=": v === x }[m[1]];
      if (!ok) return false;
    } else if (String(v === null || v === undefined ? "" : v).toLowerCase().indexOf(f.toLowerCase()) < 0) return false;
  }
  return true;
}

function matrix(index) {
  const profiles = [...new Set(index.runs.map((r) => r.arm))].sort();
  const byQ = new Map();
  for (const r of index.runs) {
    const q = r.qid || r.path;
    if (!byQ.has(q)) byQ.set(q, { question: r.question, cells: {} });
    (byQ.get(q).cells[r.arm] = byQ.get(q).cells[r.arm] || []).push(r);
  }
  const totals = {};
  for (const r of index.runs) {
    const t = (totals[r.arm] = totals[r.arm] || { correct: 0, wrong: 0, failed: 0, unjudged: 0 });
    t[r.status] += 1;
  }
  const head = el("tr", {}, el("th", {}, "question"),
    profiles.map((p) => {
      const t = totals[p], scored = t.correct + t.wrong;
      return el("th", { class: "prof" }, p, el("div", { class: "muted small" },
        scored ? Math.round((100 * t.correct) / scored) + " % of " + scored + " judged" : "–", t.failed ? " · " + t.failed + " failed" : ""));
    }));
  const body = [];
  for (const [qid, q] of byQ) {
    body.push(el("tr", {}, el("td", { class: "q", title: q.question || qid }, short(q.question || qid, 90)),
      profiles.map((p) => el("td", { class: "cell" }, (q.cells[p] || []).sort((a, b) => a.rep - b.rep).map((r) =>
        el("a", { class: "sq " + r.status, href: "#/run/" + r.key, title: p + " r" + r.rep + ": " + r.status + " (" + r.stop + ")" },
          r.status === "correct" ? "✓" : r.status === "wrong" ? "✗" : r.status === "failed" ? "!" : "?"))))));
  }
  return el("table", { class: "matrix", id: "matrix" }, el("thead", {}, head), el("tbody", {}, body));
}

function runsTable(index, holder) {
  let rows = index.runs.filter((r) => matches(r, SWEEP.filters));
  if (SWEEP.sort) {
    const c = SWEEP.sort, d = SWEEP.dir;
    rows = rows.slice().sort((a, b) => {
      const x = a[c], y = b[c];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * d;
    });
  }
  const head = el("tr", {}, COLUMNS.map(([c, label]) => el("th", {
    class: "sortable" + (SWEEP.sort === c ? (SWEEP.dir > 0 ? " asc" : " desc") : ""), dataset: { col: c },
    onclick: () => { SWEEP.dir = SWEEP.sort === c ? -SWEEP.dir : 1; SWEEP.sort = c; runsTable(index, holder); },
  }, label)));
  const filt = el("tr", { class: "filters" }, COLUMNS.map(([c, , kind]) => el("th", {}, el("input", {
    type: "search", placeholder: kind === "n" ? ">3" : "filter", value: SWEEP.filters[c] || "", dataset: { col: c },
    oninput: (e) => { SWEEP.filters[c] = e.target.value; clearTimeout(SWEEP.t);
      SWEEP.t = setTimeout(() => runsTable(index, holder, c), 150); },
  }))));
  const shown = rows.slice(0, SWEEP.limit);
  const body = shown.map((r) => el("tr", { class: "run " + r.status, dataset: { key: r.key } },
    COLUMNS.map(([c]) => {
      if (c === "question") return el("td", { class: "q" }, el("a", { href: "#/run/" + r.key, title: r.question || "" }, short(r.question || r.path, 70)));
      if (c === "status") return el("td", {}, badge(r.status));
      if (c === "hand") return el("td", { class: "hand", title: r.hand_by ? "marked by " + r.hand_by : "" }, r.hand ? badge(r.hand) : "");
      if (c === "revisit") return el("td", { class: "num" }, pct(r.revisit));
      return el("td", { class: typeof r[c] === "number" ? "num" : "" }, fmt(r[c]));
    })));
  const more = rows.length > shown.length ? el("button", { id: "more", onclick: () => { SWEEP.limit = Infinity; runsTable(index, holder); } },
    "show all " + rows.length.toLocaleString("en-US") + " runs") : null;
  const focus = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.col : null;
  holder.replaceChildren(el("p", { class: "muted", id: "count" }, rows.length.toLocaleString("en-US") + " of " +
    index.runs.length.toLocaleString("en-US") + " runs"),
    el("table", { class: "runs", id: "runs" }, el("thead", {}, head, filt), el("tbody", {}, body)), more || "");
  if (focus) { const i = holder.querySelector('input[data-col="' + focus + '"]'); if (i) { i.focus(); i.selectionStart = i.value.length; } }
}

FTE.views.sweep = function (index) {
  const name = (p) => p.split("/").filter(Boolean).slice(-2).join("/");
  crumbs(el("span", { title: index.roots.join("\n") }, index.roots.length === 1 ? name(index.roots[0]) : index.roots.length + " sweeps"));
  const holder = el("div", { id: "table" });
  runsTable(index, holder);
  show("sweep",
    el("h2", {}, index.runs.some((r) => r.context && r.context !== "keep_all") ? "Question × arm (profile · context strategy)" : "Question × profile"),
    el("p", { class: "muted small" }, "✓ correct · ✗ wrong (or no answer) · ! failed: an infrastructure failure, not a result · ? not judged. A square opens the run."),
    el("div", { class: "scroll" }, matrix(index)),
    el("h2", {}, "Runs"), holder);
};
