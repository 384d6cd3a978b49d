// The spamnb console's page.  Every text that comes from mail goes into the
// document through textContent (never innerHTML): the page is data, not markup.
"use strict";

const state = { csrf: null, user: null, role: null };
const SVGNS = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value;
    else node.setAttribute(key, String(value));
  }
  return node;
}

async function api(path, options) {
  const opts = Object.assign({ credentials: "same-origin", headers: {} }, options || {});
  if (opts.method === "POST") {
    opts.headers["Content-Type"] = "application/json";
    if (state.csrf) opts.headers["X-CSRF-Token"] = state.csrf;
  }
  const answer = await fetch("/api/v1/" + path, opts);
  let body = {};
  try { body = await answer.json(); } catch (e) { body = {}; }
  if (answer.status === 401 && path !== "login") { showLogin(); throw new Error("log in first"); }
  if (!answer.ok) throw new Error(body.error || ("HTTP " + answer.status));
  return body;
}

const view = () => document.getElementById("view");
function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
function when(t) { return new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19); }
function num(x, digits) { return (x == null) ? "" : Number(x).toFixed(digits); }

function showLogin() {
  document.getElementById("nav").hidden = true;
  document.getElementById("login-view").hidden = false;
  clear(view());
}

async function login(event) {
  event.preventDefault();
  const error = document.getElementById("login-error");
  error.textContent = "";
  try {
    const who = await api("login", { method: "POST", body: JSON.stringify({
      user: document.getElementById("login-user").value,
      password: document.getElementById("login-password").value }) });
    Object.assign(state, who);
    document.getElementById("login-password").value = "";
    started();
  } catch (e) { error.textContent = e.message; }
}

function started() {
  document.getElementById("login-view").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("who").textContent = state.user + " (" + state.role + ")";
  document.getElementById("nav-learn").hidden = !(state.role === "trainer" || state.role === "admin");
  if (!location.hash || location.hash === "#/") location.hash = "#/history";
  else route();
}

function route() {
  if (!state.csrf) return;
  const parts = location.hash.replace(/^#\//, "").split("/");
  for (const a of document.querySelectorAll("header nav a")) a.className = (a.id === "nav-" + parts[0]) ? "current" : "";
  const pages = { dashboard: dashboard, history: history, message: message, test: testPage, learn: learnPage, model: model,
                  audit: audit, cutoffs: cutoffsPage, accuracy: accuracyPage };
  const page = pages[parts[0]] || history;
  if (page !== history) prefetched = null;      // the page's first rows are for the history only, and only now
  page(parts.slice(1)).catch(e => {
    clear(view()).append(el("p", { class: "error", text: e.message }));
  });
}

// ------------------------------------------------------------------ history
const filters = { label: "", front: "", q: "" };
let prefetched = null;    // the first history page, asked for beside the session (one round trip less)

async function history(args) {
  const before = args[0] || "";
  const query = new URLSearchParams({ limit: "50" });
  for (const [k, v] of Object.entries(filters)) if (v) query.set(k, v);
  if (before) query.set("before", before);
  const path = "history?" + query.toString();
  const data = await ((prefetched && prefetched.path === path) ? prefetched.answer : api(path));
  prefetched = null;
  const root = clear(view());
  const label = el("select", { id: "filter-label" }, ...["", "spam", "unsure", "ham"].map(v => el("option", { value: v, text: v || "any verdict" })));
  label.value = filters.label;
  const front = el("select", { id: "filter-front" }, ...["", "spamd", "milter"].map(v => el("option", { value: v, text: v || "any front end" })));
  front.value = filters.front;
  const search = el("input", { id: "filter-q", type: "search", placeholder: "subject or sender" });
  search.value = filters.q;
  const apply = () => { filters.label = label.value; filters.front = front.value; filters.q = search.value;
                        if (location.hash === "#/history") route(); else location.hash = "#/history"; };
  root.append(el("h1", { text: "History" }),
    el("form", { class: "filters", id: "filters", onsubmit: (e) => { e.preventDefault(); apply(); } },
       label, front, search, el("button", { type: "submit", text: "Filter" })));
  if (data.dropped) root.append(el("p", { id: "dropped-notice", class: "error",
    text: data.dropped + " check(s) were not recorded: the record queues were full (the machine was busy, and the " +
          "checks come first). The history misses them; the dashboard counts them." }));
  const table = el("table", { id: "history" },
    el("thead", {}, el("tr", {}, ...["time", "verdict", "score", "user", "from", "subject", "front end", "action", "ms"].map(h => el("th", { text: h })))));
  const body = el("tbody");
  for (const row of data.rows) {
    const tr = el("tr", { class: "row", "data-id": String(row.id), onclick: () => { location.hash = "#/message/" + row.id; } },
      el("td", { text: when(row.t) }), el("td", { class: row.label, text: row.label + (row.learned ? " *" : "") }),
      el("td", { text: num(row.score, 1) }), el("td", { text: row.user }), el("td", { text: row.sender }),
      el("td", { class: "subject", text: row.subject }), el("td", { text: row.front }),
      el("td", { text: row.action }), el("td", { text: num(row.ms, 2) }));
    body.append(tr);
  }
  // when the rows are in the page (a mark) and painted (the last row's Element Timing): the benchmark reads both
  if (body.lastChild) body.lastChild.firstChild.setAttribute("elementtiming", "history-rows");
  table.append(body);
  root.append(table);
  if (!performance.getEntriesByName("spamnb-rows").length) performance.mark("spamnb-rows");
  if (data.next && data.rows.length >= 50) root.append(el("p", {}, el("a", { href: "#/history/" + data.next, id: "older", text: "older" })));
}

// ------------------------------------------------------------------ one message
function buildUp(row) {
  // the log-odds built up token by token: the rest of the message first, then each listed token
  const ev = row.evidence || [];
  const listed = ev.reduce((s, e) => s + e[1], 0);
  let at = row.log_odds - listed;
  const steps = [["0: no evidence", 0], ["the other tokens and the prior", at]];
  for (const [token, weight] of ev.slice().reverse()) { at += weight; steps.push([token, at]); }
  const [spamCut, hamCut] = row.cutoffs_log_odds || [null, null];
  const values = steps.map(s => s[1]).concat([spamCut, hamCut, 0].filter(v => v != null));
  const lo = Math.min(...values) - 1, hi = Math.max(...values) + 1;
  const w = 720, h = 240, pad = 40;
  const x = i => pad + (w - 2 * pad) * (steps.length > 1 ? i / (steps.length - 1) : 0);
  const y = v => h - pad - (h - 2 * pad) * (v - lo) / (hi - lo || 1);
  const chart = svg("svg", { width: w, height: h, viewBox: `0 0 ${w} ${h}`, id: "buildup", role: "img" });
  for (const [v, name, color] of [[spamCut, "spam cutoff", "#a00"], [hamCut, "ham cutoff", "#060"]]) {
    if (v == null) continue;
    chart.append(svg("line", { x1: pad, x2: w - pad, y1: y(v), y2: y(v), stroke: color, "stroke-dasharray": "4 3" }));
    chart.append(svg("text", { x: w - pad - 90, y: y(v) - 4, fill: color, "font-size": 11, text: name + " " + v.toFixed(2) }));
  }
  const points = steps.map((s, i) => `${x(i)},${y(s[1])}`).join(" ");
  chart.append(svg("polyline", { points: points, fill: "none", stroke: "#235", "stroke-width": 2 }));
  steps.forEach((s, i) => {
    const dot = svg("circle", { cx: x(i), cy: y(s[1]), r: 3, fill: "#235" });
    dot.append(svg("title", { text: s[0] + ": " + s[1].toFixed(3) }));
    chart.append(dot);
  });
  chart.append(svg("text", { x: 4, y: 14, "font-size": 11,
    text: "log-odds from 0: the message's other tokens and the prior, then the listed tokens one by one (strongest last)" }));
  return chart;
}

function highlighted(text, evidence) {
  // the text with the evidence tokens marked: every piece is a text node
  const pre = el("pre", { class: "text" });
  const words = new Map();
  for (const [token, weight] of evidence || []) {
    const word = String(token).split(":").pop().toLowerCase();
    if (word.length >= 3 && /^[\p{L}\p{N}$€£._-]+$/u.test(word)) words.set(word, weight);
  }
  if (!words.size) { pre.textContent = text; return pre; }
  const escaped = [...words.keys()].map(w => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp("(" + escaped.join("|") + ")", "giu");
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    pre.append(document.createTextNode(text.slice(last, match.index)));
    const weight = words.get(match[0].toLowerCase()) || 0;
    pre.append(el("mark", { class: weight > 0 ? "spamtok" : "hamtok", text: match[0] }));
    last = match.index + match[0].length;
  }
  pre.append(document.createTextNode(text.slice(last)));
  return pre;
}

function marked(segments) {
  // the text with each word the model knows marked where it stands, shaded by its weight: text nodes only
  const pre = el("pre", { class: "text marked" });
  for (const [text, weight] of segments) {
    if (weight == null) { pre.append(document.createTextNode(text)); continue; }
    const strength = Math.min(4, Math.floor(Math.abs(weight)));
    const mark = el("mark", { class: (weight > 0 ? "spamtok" : "hamtok") + " w" + strength, text: text });
    mark.title = text + ": " + weight.toFixed(3);
    pre.append(mark);
  }
  return pre;
}

async function message(args) {
  const row = await api("message/" + encodeURIComponent(args[0] || ""));
  const root = clear(view());
  root.append(el("h1", { id: "message-subject", text: row.subject || "(no subject)" }));
  const facts = el("table", { id: "facts" });
  const add = (k, v) => facts.append(el("tr", {}, el("th", { text: k }), el("td", { text: v == null ? "" : String(v) })));
  add("verdict", row.label + " (score " + num(row.score, 1) + ", log-odds " + num(row.log_odds, 3) + ")");
  add("from", row.sender); add("to", row.recipients); add("message id", row.message_id);
  add("user", row.user); add("front end", row.front + " " + row.verb); add("action", row.action);
  if (row.front === "milter") {
    // the SMTP envelope the MTA gave the milter (null sender: "<>")
    add("client", row.client); add("HELO", row.helo); add("MAIL FROM", row.mail_from == null ? "<>" : row.mail_from);
    add("RCPT TO", row.rcpt_to); if (row.auth) add("SASL login", row.auth);
  }
  add("time", when(row.t)); add("size", row.size); add("ledger", row.ledger == null ? "(message not kept)" : row.ledger);
  if (row.reason) add("reason", row.reason);
  root.append(facts);
  const status = el("p", { id: "action-status" });
  if (row.kept && state.role !== "viewer") {
    const act = async (verb, label) => {
      status.textContent = "";
      try {
        const out = await api("message/" + row.id + "/" + verb, { method: "POST", body: JSON.stringify(label ? { label: label } : {}) });
        status.textContent = out.result + (out.ledger ? " (ledger: " + out.ledger + ")" : "");
      } catch (e) { status.className = "error"; status.textContent = e.message; }
    };
    root.append(el("div", { class: "actions" },
      el("button", { type: "button", id: "learn-spam", onclick: () => act("learn", "spam"), text: "Learn as spam" }),
      el("button", { type: "button", id: "learn-ham", onclick: () => act("learn", "ham"), text: "Learn as ham" }),
      el("button", { type: "button", id: "forget", onclick: () => act("forget"), text: "Forget" })));
  }
  root.append(status);
  details(root, row);
}

function details(root, row) {
  // the evidence built up, the tokens, the header and the parts: the message page's and the test page's
  root.append(el("h2", { text: "Evidence" }), buildUp(row));
  const ev = el("table", { id: "evidence" }, el("tr", {}, el("th", { text: "token" }), el("th", { text: "weight" })));
  for (const [token, weight] of row.evidence || []) ev.append(el("tr", {}, el("td", { text: token }), el("td", { class: weight > 0 ? "spam" : "ham", text: num(weight, 3) })));
  root.append(ev);
  root.append(el("h2", { text: "Header" }));
  const headers = el("table", { id: "headers" });
  for (const [name, value] of row.headers || []) headers.append(el("tr", {}, el("th", { text: name }), el("td", { text: value })));
  root.append(headers);
  if (row.parts && row.parts.length) {
    root.append(el("h2", { text: "Parts" }));
    for (const part of row.parts) {
      root.append(el("h3", { class: "part", text: part.type + (part.name ? " — " + part.name : "") }));
      if (part.segments) root.append(marked(part.segments));
      else if (part.text != null) root.append(highlighted(part.text, row.evidence));
    }
  }
}

// ------------------------------------------------------------------ test a message (nothing is kept)
async function testPage() {
  const root = clear(view());
  root.append(el("h1", { text: "Test a message" }),
    el("p", { text: "Paste a message (its header and body) or choose a file (.eml): it is checked with the model " +
      "your mail is checked with, and nothing is kept." }));
  const text = el("textarea", { id: "test-text", rows: "12", cols: "100", spellcheck: "false" });
  const file = el("input", { id: "test-file", type: "file", accept: ".eml,message/rfc822,text/plain" });
  const status = el("p", { id: "test-status" });
  const out = el("div", { id: "test-result" });
  const run = async () => {
    status.className = ""; status.textContent = "checking..."; clear(out);
    const body = file.files.length ? await file.files[0].arrayBuffer() : new TextEncoder().encode(text.value);
    try {
      const answer = await fetch("/api/v1/test", { method: "POST", credentials: "same-origin", body: body,
        headers: { "Content-Type": "application/octet-stream", "X-CSRF-Token": state.csrf } });
      let row = {};
      try { row = await answer.json(); } catch (e) { row = {}; }
      if (answer.status === 401) { showLogin(); return; }
      if (!answer.ok) throw new Error(row.error || ("HTTP " + answer.status));
      status.textContent = "";
      const facts = el("table", { id: "test-facts" });
      const add = (k, v) => facts.append(el("tr", {}, el("th", { text: k }), el("td", { text: v == null ? "" : String(v) })));
      add("verdict", row.label + " (score " + num(row.score, 1) + ", log-odds " + num(row.log_odds, 3) + ")");
      add("subject", row.subject); add("from", row.sender); add("to", row.recipients);
      add("size", row.size); add("tokens", row.tokens);
      if (row.reason) add("reason", row.reason);
      out.append(facts);
      details(out, row);
    } catch (e) { status.className = "error"; status.textContent = e.message; }
  };
  root.append(el("div", {}, text), el("div", {}, el("label", { text: "or a file " }, file)),
    el("div", { class: "actions" }, el("button", { type: "button", id: "test-run", onclick: run, text: "Check it" })),
    status, out);
}

// ------------------------------------------------------------------ learn an upload (trainers and admins)
async function learnPage() {
  const root = clear(view());
  root.append(el("h1", { text: "Learn an upload" }),
    el("p", { text: "An .eml file, or an mbox of up to 200 messages: each is learned into the site model as a " +
      "click on a history row is (the ledger, the journal, the action log)." }));
  const file = el("input", { id: "learn-file", type: "file", accept: ".eml,.mbox,message/rfc822,application/mbox,text/plain" });
  const label = el("select", { id: "learn-label" }, el("option", { value: "spam", text: "spam" }), el("option", { value: "ham", text: "ham" }));
  const status = el("p", { id: "learn-status" });
  const results = el("table", { id: "learn-results" });
  const run = async () => {
    status.className = ""; clear(results);
    if (!file.files.length) { status.textContent = "choose a file first"; return; }
    status.textContent = "learning...";
    try {
      const answer = await fetch("/api/v1/learn-upload?label=" + encodeURIComponent(label.value), {
        method: "POST", credentials: "same-origin", body: await file.files[0].arrayBuffer(),
        headers: { "Content-Type": "application/octet-stream", "X-CSRF-Token": state.csrf } });
      let out = {};
      try { out = await answer.json(); } catch (e) { out = {}; }
      if (answer.status === 401) { showLogin(); return; }
      if (!answer.ok) throw new Error(out.error || ("HTTP " + answer.status));
      status.textContent = out.messages.length + " message(s) as " + out.label;
      results.append(el("tr", {}, el("th", { text: "#" }), el("th", { text: "subject" }), el("th", { text: "size" }), el("th", { text: "result" })));
      for (const m of out.messages) results.append(el("tr", {}, el("td", { text: String(m.n) }), el("td", { text: m.subject }),
        el("td", { text: String(m.size) }), el("td", { text: m.result })));
    } catch (e) { status.className = "error"; status.textContent = e.message; }
  };
  root.append(el("div", {}, el("label", { text: "file " }, file), " ", el("label", { text: "as " }, label)),
    el("div", { class: "actions" }, el("button", { type: "button", id: "learn-run", onclick: run, text: "Learn" })),
    status, results);
}

// ------------------------------------------------------------------ model, audit, dashboard
async function model() {
  const m = await api("model");
  const root = clear(view());
  root.append(el("h1", { text: "Model" }));
  const cards = el("div", { class: "cards", id: "model-cards" });
  const card = (k, v) => cards.append(el("div", { class: "card" }, el("b", { text: v }), el("span", { text: k })));
  card("spam trained", m.messages.spam); card("ham trained", m.messages.ham);
  card("vocabulary", m.vocabulary); card("ledger entries", m.ledger);
  card("spam cutoff (log-odds)", num(m.cutoffs.spam_log_odds, 3)); card("ham cutoff (log-odds)", num(m.cutoffs.ham_log_odds, 3));
  root.append(el("p", { text: m.model }), cards);
  const word = el("input", { id: "word-q", type: "search", placeholder: "a token, as the evidence shows it" });
  const wordOut = el("div", { id: "word-result" });
  const ask = async () => {
    clear(wordOut);
    try {
      const w = await api("word?w=" + encodeURIComponent(word.value));
      if (!w.known) { wordOut.append(el("p", { id: "word-unknown", text: "not in the model: " + w.token })); return; }
      const t = el("table", { id: "word-table" }, el("tr", {}, ...["token", "ham count", "spam count", "weight (log-ratio)"].map(h => el("th", { text: h }))));
      for (const x of w.tokens) t.append(el("tr", {}, el("td", { text: x.token }), el("td", { text: num(x.ham, 1) }),
        el("td", { text: num(x.spam, 1) }), el("td", { class: x.weight > 0 ? "spam" : "ham", text: num(x.weight, 3) })));
      wordOut.append(t, el("p", { text: "trained on " + w.messages.spam + " spam and " + w.messages.ham + " ham; a positive weight points to spam" }));
    } catch (e) { wordOut.append(el("p", { class: "error", text: e.message })); }
  };
  root.append(el("h2", { text: "Word query" }),
    el("form", { class: "filters", id: "word-form", onsubmit: (e) => { e.preventDefault(); ask(); } },
       word, el("button", { type: "submit", id: "word-button", text: "Look up" })), wordOut);
  for (const [title, rows] of [["Strongest spam tokens", m.spam_tokens], ["Strongest ham tokens", m.ham_tokens]]) {
    const t = el("table", {}, el("tr", {}, ...["token", "log-ratio", "ham count", "spam count"].map(h => el("th", { text: h }))));
    for (const [token, w, nh, ns] of rows) t.append(el("tr", {}, el("td", { text: token }), el("td", { text: num(w, 3) }), el("td", { text: nh }), el("td", { text: ns })));
    root.append(el("h2", { text: title }), t);
  }
}

async function audit() {
  const a = await api("audit");
  const root = clear(view());
  root.append(el("h1", { text: "Audit" }), el("h2", { text: "Learned messages in the history (auto-learned first)" }));
  const t = el("table", { id: "audit" }, el("tr", {}, ...["time", "verdict", "ledger", "from", "subject"].map(h => el("th", { text: h }))));
  for (const row of a.rows) t.append(el("tr", { class: "row", onclick: () => { location.hash = "#/message/" + row.id; } },
    el("td", { text: when(row.t) }), el("td", { class: row.label, text: row.label }), el("td", { text: row.ledger }),
    el("td", { text: row.sender }), el("td", { class: "subject", text: row.subject })));
  root.append(t);
  if (a.actions.length) {
    const log = el("table", { id: "actions" }, el("tr", {}, ...["time", "who", "what", "record", "result"].map(h => el("th", { text: h }))));
    for (const x of a.actions) log.append(el("tr", {}, el("td", { text: when(x.t) }), el("td", { text: x.who }), el("td", { text: x.what }), el("td", { text: x.record == null ? "" : x.record }), el("td", { text: x.result })));
    root.append(el("h2", { text: "Console actions" }), log);
  }
}

// ------------------------------------------------------------------ cutoffs, accuracy over time
function lineChart(id, points, label, w, h, color) {
  // points: [[x, y]] with x in [0, 1]; y scaled to the largest
  const pad = 30, max = Math.max(1e-9, ...points.map(p => p[1]));
  const chart = svg("svg", { width: w, height: h, viewBox: `0 0 ${w} ${h}`, id: id, role: "img" });
  chart.append(svg("line", { x1: pad, x2: w - pad, y1: h - pad, y2: h - pad, stroke: "#888" }));
  if (points.length) chart.append(svg("polyline", { fill: "none", stroke: color, "stroke-width": 2,
    points: points.map(p => `${pad + (w - 2 * pad) * p[0]},${h - pad - (h - 2 * pad) * p[1] / max}`).join(" ") }));
  for (const p of points) chart.append(svg("circle", { cx: pad + (w - 2 * pad) * p[0], cy: h - pad - (h - 2 * pad) * p[1] / max, r: 2, fill: color }));
  chart.append(svg("text", { x: 4, y: 14, "font-size": 11, text: label + " (max " + (+max.toFixed(3)) + ")" }));
  return chart;
}

async function cutoffsPage(args) {
  const query = args[0] ? "?" + args[0] : "";
  const c = await api("cutoffs" + query);
  const root = clear(view());
  root.append(el("h1", { text: "Cutoffs" }),
    el("p", { text: "What a pair of cutoffs (log-odds) would do on the recorded mail and on the mail corrected in " +
      "the console, against what the recorded verdicts did. The model's cutoffs: spam " + num(c.current[0], 3) +
      ", ham " + num(c.current[1], 3) + "." }));
  const spam = el("input", { id: "cut-spam", type: "number", step: "any", value: String(c.spam) });
  const ham = el("input", { id: "cut-ham", type: "number", step: "any", value: String(c.ham) });
  root.append(el("form", { class: "filters", id: "cut-form", onsubmit: (e) => { e.preventDefault();
    location.hash = "#/cutoffs/" + new URLSearchParams({ spam: spam.value, ham: ham.value }).toString(); } },
    el("label", { text: "spam at or above " }, spam), el("label", { text: " ham at or below " }, ham),
    el("button", { type: "submit", id: "cut-button", text: "Try" })));
  const t = el("table", { id: "cutoff-result" }, el("tr", {}, ...["", "spam", "unsure", "ham"].map(h => el("th", { text: h }))));
  const row = (name, x) => t.append(el("tr", {}, el("th", { text: name }), el("td", { text: String(x.spam) }),
    el("td", { text: String(x.unsure) }), el("td", { text: String(x.ham) })));
  row("recorded verdicts", c.recorded); row("these cutoffs, every row", c.would);
  row("these cutoffs, rows corrected to spam", c.corrected.spam); row("these cutoffs, rows corrected to ham", c.corrected.ham);
  root.append(t, el("p", { id: "cutoff-errors", text: "on the corrected mail these cutoffs would let " +
    (c.corrected.spam.ham + c.corrected.spam.unsure) + " spam through (ham or unsure) and call " + c.corrected.ham.spam +
    " ham spam; the recorded verdicts got " + c.corrected.spam.recorded_right + " of " +
    (c.corrected.spam.spam + c.corrected.spam.unsure + c.corrected.spam.ham) + " spam and " + c.corrected.ham.recorded_right +
    " of " + (c.corrected.ham.spam + c.corrected.ham.unsure + c.corrected.ham.ham) + " ham right" }));
  // the histogram of recorded log-odds with both cutoffs
  const w = 720, h = 200, pad = 30, span = 60;
  const chart = svg("svg", { width: w, height: h, viewBox: `0 0 ${w} ${h}`, id: "cutoff-chart", role: "img" });
  const max = Math.max(1, ...c.histogram.map(b => b[1]));
  const x = v => pad + (w - 2 * pad) * (Math.max(-span, Math.min(span, v)) + span) / (2 * span);
  for (const [b, n] of c.histogram) {
    const bh = (h - 2 * pad) * n / max;
    chart.append(svg("rect", { x: x(b - 0.5), y: h - pad - bh, width: Math.max(1, x(b + 0.5) - x(b - 0.5) - 1), height: bh,
      fill: b >= c.spam ? "#c44" : (b <= c.ham ? "#4a4" : "#ca4") }));
  }
  for (const [v, color] of [[c.spam, "#a00"], [c.ham, "#060"]])
    chart.append(svg("line", { x1: x(v), x2: x(v), y1: pad, y2: h - pad, stroke: color, "stroke-dasharray": "4 3" }));
  chart.append(svg("text", { x: 4, y: 14, "font-size": 11, text: "recorded checks by log-odds (" + -span + " to " + span + "), max " + max }));
  root.append(chart);
}

async function accuracyPage() {
  const a = await api("accuracy?days=30");
  const root = clear(view());
  root.append(el("h1", { text: "Accuracy over time (last 30 days)" }),
    el("p", { text: "From the corrections made in the console: a row learned as spam that was checked ham or unsure " +
      "is spam let through; a row learned as ham that was checked spam is a false positive. Rates are per check." }));
  const n = a.buckets;
  const pts = (f) => a.rows.map(r => [n > 1 ? r.b / (n - 1) : 0, r.checks ? f(r) / r.checks : 0]);
  root.append(lineChart("accuracy-chart", pts(r => r.missed_spam + r.false_positives), "errors corrected per check, per " + Math.round(a.width / 3600) + " h", 720, 180, "#a00"),
    lineChart("unsure-chart-30d", pts(r => r.unsure), "unsure rate", 720, 180, "#ca4"));
  const t = el("table", { id: "accuracy" }, el("tr", {}, ...["from", "checks", "learned", "spam let through", "false positives", "unsure"].map(h => el("th", { text: h }))));
  for (const r of a.rows) t.append(el("tr", {}, el("td", { text: when(a.since + r.b * a.width) }), el("td", { text: String(r.checks) }),
    el("td", { text: String(r.learned) }), el("td", { text: String(r.missed_spam) }), el("td", { text: String(r.false_positives) }),
    el("td", { text: String(r.unsure) })));
  root.append(t);
}

async function dashboard() {
  const s = await api("stats?minutes=60");
  const root = clear(view());
  root.append(el("h1", { text: "Dashboard (last hour)" }));
  const totals = { spam: 0, ham: 0, unsure: 0 };
  const perBucket = new Map();
  let msSum = 0, msN = 0;
  for (const r of s.rows) {
    totals[r.label] = (totals[r.label] || 0) + r.n;
    const b = perBucket.get(r.b) || { spam: 0, ham: 0, unsure: 0 };
    b[r.label] = (b[r.label] || 0) + r.n; perBucket.set(r.b, b);
    if (r.ms != null) { msSum += r.ms * r.n; msN += r.n; }
  }
  const all = totals.spam + totals.ham + totals.unsure;
  const cards = el("div", { class: "cards", id: "dashboard-cards" });
  const card = (k, v) => cards.append(el("div", { class: "card" }, el("b", { text: v }), el("span", { text: k })));
  card("checks", all); card("spam", totals.spam); card("ham", totals.ham);
  card("unsure rate", all ? (100 * totals.unsure / all).toFixed(1) + " %" : "-");
  card("mean ms", msN ? (msSum / msN).toFixed(2) : "-");
  if (s.received != null) { card("records received", s.received); card("records dropped", s.dropped); }
  root.append(cards);
  const w = 720, h = 200, pad = 30, n = s.buckets;
  const max = Math.max(1, ...[...perBucket.values()].map(b => b.spam + b.ham + b.unsure));
  const chart = svg("svg", { width: w, height: h, viewBox: `0 0 ${w} ${h}`, id: "throughput" });
  const bw = (w - 2 * pad) / n;
  for (const [b, c] of perBucket) {
    let y0 = h - pad;
    for (const [label, color] of [["ham", "#4a4"], ["unsure", "#ca4"], ["spam", "#c44"]]) {
      const bh = (h - 2 * pad) * c[label] / max;
      chart.append(svg("rect", { x: pad + b * bw, y: y0 - bh, width: Math.max(1, bw - 1), height: bh, fill: color }));
      y0 -= bh;
    }
  }
  chart.append(svg("text", { x: 4, y: 14, "font-size": 11, text: "checks per " + Math.round(s.width) + " s, by verdict (max " + max + ")" }));
  root.append(chart);
  const ms = new Map();
  for (const r of s.rows) if (r.ms != null) { const m = ms.get(r.b) || [0, 0]; m[0] += r.ms * r.n; m[1] += r.n; ms.set(r.b, m); }
  const order = [...perBucket.keys()].sort((a, b) => a - b);
  const at = b => n > 1 ? b / (n - 1) : 0;
  root.append(lineChart("unsure-chart", order.map(b => { const c = perBucket.get(b); const all = c.spam + c.ham + c.unsure;
                                                        return [at(b), all ? c.unsure / all : 0]; }), "unsure rate per " + Math.round(s.width) + " s", w, 160, "#ca4"),
              lineChart("latency-chart", order.filter(b => ms.has(b)).map(b => [at(b), ms.get(b)[0] / ms.get(b)[1]]),
                        "mean ms a check per " + Math.round(s.width) + " s", w, 160, "#235"));
}

window.addEventListener("hashchange", route);

// ``then`` once the rows the console drew are on the screen: their Element Timing entry (the last row's
// ``elementtiming``), at most ROWS_WAIT ms; a frame later where the browser has no Element Timing or no rows
const ROWS_WAIT = 1000;
function afterRowsShown(then) {
  let done = false;
  const go = () => { if (!done) { done = true; setTimeout(then, 0); } };
  const types = (window.PerformanceObserver && PerformanceObserver.supportedEntryTypes) || [];
  if (!types.includes("element") || !document.querySelector('[elementtiming="history-rows"]')) {
    requestAnimationFrame(() => setTimeout(go, 0));
    return;
  }
  const seen = new PerformanceObserver(list => {
    if (list.getEntries().some(e => e.identifier === "history-rows")) { seen.disconnect(); go(); }
  });
  seen.observe({ type: "element", buffered: true });
  setTimeout(() => { seen.disconnect(); go(); }, ROWS_WAIT);
}

// The script is loaded async at the end of the page: it may run before or after the page is parsed, and
// nothing of the page's first paint waits for it (the rows are drawn by the console in the HTML).
async function start() {
  document.getElementById("login-form").addEventListener("submit", login);
  document.getElementById("logout").addEventListener("click", async () => {
    try { await api("logout", { method: "POST", body: "{}" }); } catch (e) { /* logged out anyway */ }
    state.csrf = null; showLogin();
  });
  const boot = document.getElementById("boot");    // a logged-in browser: the session and the first rows in the page
  if (boot) {
    // the console drew the rows in the page: let the browser paint them and show the frame first, then read
    // the data block and draw the page with its links and filters.  Until the frame is shown the script does
    // nothing (on a busy machine its work would take the CPU the frame still needs)
    afterRowsShown(() => {
      const data = JSON.parse(boot.textContent);
      boot.remove();
      prefetched = { path: data.history.path, answer: Promise.resolve(data.history) };
      Object.assign(state, data.session);
      started();
    });
    return;
  }
  if (!location.hash || location.hash === "#/" || location.hash === "#/history") {
    const path = "history?limit=50";
    prefetched = { path: path, answer: api(path) };
    prefetched.answer.catch(() => { prefetched = null; });
  }
  try {
    const who = await api("session");
    Object.assign(state, who);
    started();
  } catch (e) { showLogin(); }
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
