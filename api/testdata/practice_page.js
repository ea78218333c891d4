// Runs the practice page's app.js under Node against a Lectern server, in a
// DOM stub just large enough for it, through a scenario of
// api/practice_page_test.go, and prints what it saw as a JSON line.
//
//   node practice_page.js BASE_URL ACCESS REFRESH APP_JS SCENARIO
"use strict";
const vm = require("vm");
const fs = require("fs");
const [base, access, refresh, appPath, scenario] = process.argv.slice(2);

// El is an element: the selectors it knows are tag, .class and :checked.
class El {
  constructor(tag, id = "") {
    Object.assign(this, { tagName: tag.toUpperCase(), id, parent: null, children: [], own: "", picked: "" });
    Object.assign(this, { dataset: {}, attrs: {}, listeners: {}, classes: new Set() });
    this.classList = { add: (c) => this.classes.add(c), toggle: (c, on) => (on ? this.classes.add(c) : this.classes.delete(c)) };
  }
  get isConnected() { return this.parent ? this.parent.isConnected : byID.get(this.id) === this; }
  set className(v) { this.classes = new Set(v.split(" ")); }
  get textContent() { return this.own + this.children.map((c) => c.textContent).join(""); }
  set textContent(v) { this.replaceChildren(); this.own = String(v); }
  // A select's value is its chosen option's, or its first option's.
  get value() {
    const opts = this.tagName === "SELECT" ? this.children.map((o) => o.value) : [this.picked];
    return opts.includes(this.picked) ? this.picked : opts[0] || "";
  }
  set value(v) { this.picked = String(v); }
  append(...nodes) { for (const n of nodes) { n.remove(); n.parent = this; this.children.push(n); } }
  replaceChildren() { for (const c of [...this.children]) c.remove(); this.own = ""; }
  remove() { if (this.parent) this.parent.children.splice(this.parent.children.indexOf(this), 1); this.parent = null; }
  setAttribute(k, v) { this.attrs[k] = String(v); }
  removeAttribute(k) { delete this.attrs[k]; }
  addEventListener(type, f) { (this.listeners[type] ||= []).push(f); }
  dispatch(type) { for (const f of this.listeners[type] || []) f({ preventDefault() {} }); }
  scrollIntoView() {}
  querySelectorAll(sel) {
    const [, tag, cls, checked] = /^(\w*)(?:\.([\w-]+))?(:checked)?$/.exec(sel);
    const all = (e) => e.children.flatMap((c) => [c, ...all(c)]);
    return all(this).filter((e) => (!tag || e.tagName === tag.toUpperCase()) && (!cls || e.classes.has(cls)) && (!checked || e.checked));
  }
  querySelector(sel) { return this.querySelectorAll(sel)[0] || null; }
}

const byID = new Map();
const document = {
  getElementById(id) {
    if (!byID.has(id)) byID.set(id, new El(id === "class" ? "select" : "div", id));
    return byID.get(id);
  },
  createElement: (tag) => new El(tag),
  createTextNode(text) { const n = new El("#text"); n.textContent = text; return n; },
};
const store = new Map([["lectern.access", access], ["lectern.refresh", refresh]]);
const localStorage = { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => store.set(k, String(v)), removeItem: (k) => store.delete(k) };
const posted = []; // "POST /path" of each request the page sent
const reread = []; // the path of each GET of one session the page sent
let cutNext = null; // how the next streamed turn is cut short (see cutShort)
const realFetch = fetch;
Object.assign(globalThis, {
  document, localStorage,
  fetch(path, opts) {
    if (opts.method === "POST") posted.push("POST " + path);
    if (opts.method === "GET" && /^\/user\/practice\/sessions\/\d+$/.test(path)) reread.push(path);
    const res = realFetch(base + path, opts);
    const cut = cutNext;
    if (!cut || (opts.headers || {}).Accept !== "text/event-stream") return res;
    cutNext = null;
    return res.then((r) => cutShort(r, cut));
  },
});

// cutShort is r, a turn's stream, cut short as a lost connection or a
// proxy that ends the body would: its events go through up to and
// including the first named cut.after, or up to the first named cut.before,
// then the real response is dropped (the server sees its client leave) and
// the page's body errors as undici's does when the connection is lost
// (cut.how "drop") or just ends (cut.how "end").
function cutShort(r, cut) {
  if (!(r.headers.get("Content-Type") || "").startsWith("text/event-stream")) return r;
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let buf = "";
  const body = new ReadableStream({
    async pull(out) {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return out.close(); // it ended before the cut
        buf += decoder.decode(value, { stream: true });
        let end;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, end + 2);
          buf = buf.slice(end + 2);
          const name = (/^event: (.*)$/m.exec(block) || [])[1];
          if (name && name === cut.before) return stop(out);
          out.enqueue(encoder.encode(block));
          if (name && name === cut.after) return stop(out);
        }
      }
    },
  });
  async function stop(out) {
    await reader.cancel();
    if (cut.how === "drop") out.error(new TypeError("terminated"));
    else out.close();
  }
  return new Response(body, { status: r.status, statusText: r.statusText, headers: r.headers });
}

const $ = (id) => document.getElementById(id);
const busy = () => vm.runInThisContext("state.busy"); // app.js's own state
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, f) {
  for (let i = 0; i < 1500; i++) {
    if (f()) return;
    await sleep(20);
  }
  throw new Error("timed out waiting for " + what);
}

// ask sends prompt to model alone, as the student does; with wait, until the
// turn ends.
async function ask(model, prompt, wait = true) {
  for (const box of $("models").querySelectorAll("input")) box.checked = box.value === model;
  $("prompt").value = prompt;
  $("prompt-form").dispatch("submit");
  if (wait) await until("the turn", () => !busy());
}

// since returns the POSTs the page sent from posted[mark] on.
const since = (mark) => posted.slice(mark).join(", ");
const lastTurn = () => $("turns").querySelectorAll("article").pop() || { dataset: {} };
const session = () => vm.runInThisContext("state.session"); // the page's session, null for a new one
// shown is what the page shows once a turn has ended: its status line, the
// prompt box, the turns, and the session it is on.
const shown = () => ({
  Status: $("status").textContent,
  StatusIsError: $("status").classes.has("error"),
  Prompt: $("prompt").value,
  Turns: $("turns").querySelectorAll("article").map((a) => a.dataset.recorded ?? ""),
  Columns: $("turns").querySelectorAll("section").map((c) => c.dataset.state + ": " + c.querySelector(".text").textContent),
  Session: session(),
});

const scenarios = {
  // A first turn whose every model fails, then a second turn.
  async "failed-first"() {
    await ask("broken", "first prompt");
    const first = $("status").textContent;
    const mark = posted.length;
    await ask("echo", "second prompt");
    return { First: first, Second: $("status").textContent, SecondRecorded: lastTurn().dataset.recorded ?? "", SecondRequested: since(mark) };
  },
  // New clicked while a turn streams, then a turn once it has ended.
  async "new-during-stream"() {
    await ask("echo", "one two three four five six seven eight nine ten eleven twelve", false);
    await until("the first delta", () => $("turns").querySelectorAll("section").some((c) => c.dataset.deltas !== "0"));
    $("new-session").dispatch("click");
    await until("the turn", () => !busy());
    const turns = $("turns").querySelectorAll("article").length;
    const mark = posted.length;
    await ask("echo", "a new conversation");
    return { Turns: turns, SecondRequested: since(mark) };
  },
  // A first turn whose connection is lost after its first delta (its one
  // model then stalls until its timeout: the turn is never recorded), then
  // a second turn.
  async "cut-first"() {
    cutNext = { after: "delta", how: "drop" };
    await ask("stall", "an interrupted first prompt");
    const cut = shown();
    const mark = posted.length;
    await ask("echo", "a second prompt");
    return { Cut: cut, Reread: reread, NextRequested: since(mark), Next: shown() };
  },
  // A recorded first turn, then a second whose body ends after its first
  // delta (never recorded, as above), then a third.
  async "cut-later"() {
    await ask("echo", "a recorded first prompt");
    const first = session();
    cutNext = { after: "delta", how: "end" };
    await ask("stall", "an interrupted second prompt");
    const cut = shown();
    const mark = posted.length;
    await ask("echo", "a third prompt");
    return { First: first, Cut: cut, Reread: reread, NextRequested: since(mark), Next: shown() };
  },
  // A first turn whose connection is lost just before its turn event: the
  // turn is recorded, but the page is not told so.
  async "cut-before-turn"() {
    cutNext = { before: "turn", how: "drop" };
    await ask("echo", "a first prompt recorded unseen");
    const cut = shown();
    const listed = $("sessions").querySelectorAll("button").map((b) => b.dataset.session + (b.attrs["aria-current"] ? "*" : ""));
    return { Cut: cut, Reread: reread, Listed: listed };
  },
};

(async () => {
  vm.runInThisContext(fs.readFileSync(appPath, "utf8"), { filename: "app.js" });
  await until("the practice page", () => $("models").querySelectorAll("input").length > 0 && $("class").value !== "");
  console.log(JSON.stringify(await scenarios[scenario]()));
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
