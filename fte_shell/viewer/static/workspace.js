// The workspace view: the documents the run fetched (with the turn that fetched each), a timeline per
// document of the turns that touched it (a revisit is visible at a glance), and a document's text with the
// lines each grep hit and each read window returned highlighted and linked back to their turn.
"use strict";

function timeline(run, doc) {
  const n = Math.max(run.row.turns, ...doc.touches.map((t) => t.turn), 1);
  const at = new Map();
  for (const t of doc.touches) (at.get(t.turn) || at.set(t.turn, []).get(t.turn)).push(t.op);
  const cells = [];
  for (let i = 1; i <= n; i++) {
    const ops = at.get(i);
    const op = !ops ? "" : ops.includes("grep") ? "grep" : ops.includes("read") ? "read" : "fetch";
    cells.push(ops ? el("a", { class: "tl " + op, href: "#/run/" + run.row.key + "/turn/" + i, title: "turn " + i + ": " + ops.join(", ") })
      : el("span", { class: "tl", title: "turn " + i }));
  }
  return el("div", { class: "timeline" }, cells);
}

function docList(run, open) {
  const rows = run.workspace.map((d) => el("tr", { class: d.n === open ? "open" : "" },
    el("td", {}, el("a", { href: "#/run/" + run.row.key + "/ws/" + d.n, class: "docname" }, d.name),
      el("div", { class: "muted small" }, short(d.title || "", 60), " · ", short(d.source || "", 60))),
    el("td", { class: "num" }, d.fetched === null ? "–" : el("a", { href: "#/run/" + run.row.key + "/turn/" + d.fetched }, "turn " + d.fetched)),
    el("td", { class: "num" }, fmt(d.lines)),
    el("td", {}, d.revisited ? el("span", { class: "flag revisit" }, "revisited") : null),
    el("td", {}, timeline(run, d))));
  return el("table", { class: "docs", id: "docs" }, el("thead", {}, el("tr", {}, el("th", {}, "document"),
    el("th", {}, "fetched"), el("th", {}, "lines"), el("th", {}, ""), el("th", {}, "turns that touched it ",
    ["fetch", "grep", "read"].map((o) => el("span", { class: "legend " + o }, o))))),
    el("tbody", {}, rows));
}

function docText(run, meta, doc) {
  const marks = new Map(); // line -> [{turn, op, hit}]
  for (const t of meta.touches) {
    for (const l of t.hits) (marks.get(l) || marks.set(l, []).get(l)).push({ turn: t.turn, op: "grep", hit: true });
    for (const l of t.lines) (marks.get(l) || marks.set(l, []).get(l)).push({ turn: t.turn, op: t.op, hit: false });
  }
  const rows = doc.lines.map((text, i) => {
    const n = i + 1, m = marks.get(n);
    const cls = !m ? "ln" : m.some((x) => x.hit) ? "ln hit" : "ln read";
    return el("div", { class: cls, id: "L" + n },
      el("span", { class: "no" }, String(n)),
      el("span", { class: "by" }, m ? m.map((x) => el("a", { href: "#/run/" + run.row.key + "/turn/" + x.turn, class: "mark " + (x.hit ? "grep" : x.op) },
        (x.hit ? "grep" : x.op) + " t" + x.turn)) : null),
      el("span", { class: "tx" }, text));
  });
  // chunks of lines the browser lays out only when they scroll into view (content-visibility)
  const chunks = [];
  for (let i = 0; i < rows.length; i += 200) chunks.push(el("div", { class: "chunk" }, rows.slice(i, i + 200)));
  return el("div", { class: "doc", id: "doctext" }, el("h3", {}, meta.name), chunks);
}

FTE.views.workspace = async function (index, key, n, line) {
  const run = await load("run/" + key);
  crumbs(el("a", { href: "#/run/" + key }, short(run.row.question || run.row.path, 60)), el("a", { href: "#/run/" + key + "/ws" }, "workspace"));
  const parts = [el("h2", {}, "Workspace ", el("span", { class: "muted" }, run.row.profile + " · " + run.workspace.length + " documents")),
    run.workspace.length ? docList(run, n) : el("p", { class: "muted" }, "This run kept no documents (its profile has no workspace, or it fetched nothing).")];
  const meta = run.workspace.find((d) => d.n === n);
  if (meta) parts.push(docText(run, meta, await load("doc/" + key + "/" + n)));
  show("workspace", ...parts);
  if (meta) {
    const first = line ? document.getElementById("L" + line) : (document.querySelector("#doctext .hit") || document.querySelector("#doctext .read"));
    if (first) { first.classList.add("target"); first.scrollIntoView({ block: "center" }); }
  }
};
