// fte-shell view: the core (data loading, routing, DOM helpers). Everything that came from a model or a
// page is put into the page as TEXT (textContent / text nodes), never parsed as HTML.
"use strict";

const FTE = { cache: {}, waiting: {}, views: {} };

// The hand check's session token: in the URL that `fte-shell view` prints (?token=…), kept for this tab
// only and taken out of the address bar. Without it (a static site, or a URL without the token) the
// viewer is read-only.
FTE.token = (function () {
  if (!location.protocol.startsWith("http")) return null;
  try {
    const q = new URLSearchParams(location.search).get("token");
    if (q) {
      sessionStorage.setItem("fte-token", q);
      history.replaceState(null, "", location.pathname + location.hash);
    }
    return sessionStorage.getItem("fte-token");
  } catch (e) {
    return null;
  }
})();

// data/<key>.js files call FTE.got(key, data); they are loaded on demand, one <script> each, so a large
// sweep opens with its index only (this also works from file://, where fetch() of local files does not).
FTE.got = function (key, data) {
  FTE.cache[key] = data;
  (FTE.waiting[key] || []).forEach((w) => w.resolve(data));
  delete FTE.waiting[key];
};

function load(key) {
  return new Promise((resolve, reject) => {
    if (key in FTE.cache) return resolve(FTE.cache[key]);
    const first = !FTE.waiting[key];
    (FTE.waiting[key] = FTE.waiting[key] || []).push({ resolve, reject });
    if (!first) return;
    const s = document.createElement("script");
    s.src = "data/" + key + ".js";
    s.onerror = () => {
      (FTE.waiting[key] || []).forEach((w) => w.reject(new Error("cannot load " + key)));
      delete FTE.waiting[key];
    };
    document.head.appendChild(s);
  });
}

// el("div", {class: "x", href: "#/run/1"}, "text", child…): strings become text nodes
function el(tag, props, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "href") e.setAttribute("href", /^(#|files\/\d+\/)/.test(String(v)) ? v : "#"); // our own links only
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(e.dataset, v);
    else e.setAttribute(k, String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    e.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return e;
}

function fmt(v, digits) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") {
    if (digits !== undefined) return v.toFixed(digits);
    return Number.isInteger(v) ? v.toLocaleString("en-US") : v.toFixed(2);
  }
  return String(v);
}
function pct(v) { return v === null || v === undefined ? "–" : Math.round(v * 100) + " %"; }
function short(s, n) { s = s === null || s === undefined ? "" : String(s); return s.length > n ? s.slice(0, n - 1) + "…" : s; }
function badge(status) { return el("span", { class: "badge " + status }, status); }

// a block of text; long text is collapsed with its size shown and only built when opened
function textBlock(text, opts) {
  opts = opts || {};
  text = text === null || text === undefined ? "" : String(text);
  const lines = text.split("\n").length;
  const big = text.length > (opts.maxChars || 1500) || lines > (opts.maxLines || 25);
  const cls = "text" + (opts.cls ? " " + opts.cls : "");
  if (!big && !opts.collapsed) return el("pre", { class: cls }, text);
  const d = el("details", { class: "big" },
    el("summary", {}, (opts.label || "text") + " (" + text.length.toLocaleString("en-US") + " chars, " +
      lines.toLocaleString("en-US") + (lines === 1 ? " line)" : " lines)")));
  if (!opts.collapsed) d.appendChild(el("pre", { class: cls + " preview" }, short(text.split("\n").slice(0, 6).join("\n"), 600)));
  d.addEventListener("toggle", () => {
    if (d.open && !d.dataset.filled) { d.dataset.filled = "1"; d.appendChild(el("pre", { class: cls }, text)); }
    const p = d.querySelector(".preview"); if (p) p.hidden = d.open;
  });
  return d;
}

function crumbs(...parts) {
  const c = document.getElementById("crumbs");
  c.replaceChildren(...parts.filter(Boolean).map((p) => el("span", { class: "crumb" }, " › ", p)));
}

function show(view, ...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false));
  document.body.dataset.view = view;
  document.body.dataset.ready = "1";
}

async function route() {
  document.body.dataset.ready = "0";
  const parts = (location.hash.replace(/^#\/?/, "") || "").split("/").filter(Boolean);
  try {
    const index = await load("index");
    if (!parts.length) {
      if (index.runs.length === 1) return FTE.views.run(index, 0, {});
      return FTE.views.sweep(index);
    }
    const [what, a, b, c, d] = parts;
    if (what === "run" && b === "ws") return FTE.views.workspace(index, +a, c === undefined ? null : +c, d === undefined ? null : +d);
    if (what === "run") return FTE.views.run(index, +a, { turn: b === "turn" ? +c : null });
    if (what === "compare") return FTE.views.compare(index, +a, +b);
    show("error", el("p", { class: "error" }, "unknown page: " + location.hash));
  } catch (e) {
    show("error", el("p", { class: "error" }, String(e && e.message ? e.message : e)));
  }
}

// one route at a time, in order: a slow page can never paint over the one asked for after it
let routing = Promise.resolve();
function queueRoute() { routing = routing.then(route, route); }
window.addEventListener("hashchange", queueRoute);
window.addEventListener("DOMContentLoaded", queueRoute);
