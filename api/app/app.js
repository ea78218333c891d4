// Lectern's practice page: sign in, pick a class and models, and watch the
// models answer side by side as their answers stream (Server-Sent Events read
// from fetch: EventSource cannot POST); continue the chat, browse sessions.
// Plain JavaScript, no build step; every text goes in through textContent.
"use strict";

const $ = (id) => document.getElementById(id);

const state = {
  access: localStorage.getItem("lectern.access"),
  refresh: localStorage.getItem("lectern.refresh"),
  position: "", // the last write's X-Event-Position: reads wait for it
  session: null, // the open session's id; null: the next turn starts one
  responses: new Set(), // the ids of the open session's responses the page shows as recorded
  busy: false,
  email: "",
  verificationToken: "",
  verifiedToken: "",
};

class APIError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

// detailText reads the API's {"detail": ...} errors, 422 lists included.
function detailText(body, status) {
  if (body && typeof body.detail === "string") return body.detail;
  if (body && Array.isArray(body.detail)) {
    return body.detail.map((d) => (d.loc || []).slice(1).join(".") + ": " + d.msg).join("; ");
  }
  return "The server answered " + status;
}

// request sends a request with the caller's token (refreshed once on a 401),
// reads waiting for the last write.
async function request(method, path, body, opts = {}) {
  const headers = Object.assign({}, opts.headers);
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (state.access && !opts.anonymous) headers["Authorization"] = "Bearer " + state.access;
  if (method === "GET" && state.position) headers["X-Min-Position"] = state.position;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: opts.signal });
  if (res.status === 401 && !opts.anonymous && !opts.retried && state.refresh && (await refreshTokens())) {
    return request(method, path, body, Object.assign({}, opts, { retried: true }));
  }
  const position = res.headers.get("X-Event-Position");
  if (position) state.position = position;
  return res;
}

async function json(method, path, body, opts) {
  const res = await request(method, path, body, opts);
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) throw new APIError(res.status, detailText(data, res.status));
  return data;
}

function saveTokens(t) {
  state.access = t.access_token;
  state.refresh = t.refresh_token;
  localStorage.setItem("lectern.access", t.access_token);
  localStorage.setItem("lectern.refresh", t.refresh_token);
}

function forgetTokens() {
  state.access = state.refresh = null;
  localStorage.removeItem("lectern.access");
  localStorage.removeItem("lectern.refresh");
}

async function refreshTokens() {
  try {
    saveTokens(await json("POST", "/user/token/refresh", { refresh_token: state.refresh }, { anonymous: true }));
    return true;
  } catch {
    forgetTokens();
    return false;
  }
}

// Signing in.

function showSignin(message) {
  $("signin").hidden = false;
  $("practice").hidden = true;
  $("account").hidden = true;
  $("signin-error").textContent = message || "";
}

function selectTab(signup) {
  $("tab-login").setAttribute("aria-selected", String(!signup));
  $("tab-signup").setAttribute("aria-selected", String(signup));
  $("login-form").hidden = signup;
  $("signup").hidden = !signup;
  $("signin-error").textContent = "";
}

// guarded runs a form's action with its button disabled, showing its error.
function guarded(form, errorEl, action) {
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    errorEl.textContent = "";
    errorEl.classList.add("error");
    try {
      await action();
    } catch (err) {
      errorEl.textContent = err.message;
    } finally {
      button.disabled = false;
    }
  });
}

async function enter() {
  const me = await json("GET", "/user/me");
  $("who").textContent = me.name + " · " + me.email;
  $("account").hidden = false;
  $("signin").hidden = true;
  $("practice").hidden = false;
  await Promise.all([loadClasses(), loadModels(), loadSessions()]);
}

// Classes, models and sessions.

async function loadClasses(select) {
  const list = await json("GET", "/user/class/enrollments?size=200");
  const sel = $("class");
  const keep = select || sel.value || localStorage.getItem("lectern.class");
  sel.replaceChildren();
  const active = list.items.filter((e) => e.status === "active");
  for (const e of active) {
    const opt = document.createElement("option");
    opt.value = String(e.class_id);
    opt.textContent = "Class " + e.class_id;
    sel.append(opt);
  }
  if (!active.length) {
    const opt = document.createElement("option");
    opt.value = "";
    opt.textContent = "No class yet: join one";
    sel.append(opt);
  }
  if (keep && active.some((e) => String(e.class_id) === String(keep))) sel.value = String(keep);
}

async function loadModels() {
  const models = await json("GET", "/models");
  const saved = JSON.parse(localStorage.getItem("lectern.models") || "null");
  const box = $("models");
  box.querySelectorAll("label").forEach((l) => l.remove());
  for (const m of models) {
    const label = document.createElement("label");
    const input = document.createElement("input");
    input.type = "checkbox";
    input.value = m.name;
    input.checked = saved ? saved.includes(m.name) : m.is_default;
    input.addEventListener("change", () => localStorage.setItem("lectern.models", JSON.stringify(chosenModels())));
    label.append(input, document.createTextNode(m.name));
    box.append(label);
  }
}

function chosenModels() {
  return [...$("models").querySelectorAll("input:checked")].map((i) => i.value);
}

async function loadSessions() {
  const list = await json("GET", "/user/practice/sessions?size=50");
  const ul = $("sessions");
  ul.replaceChildren();
  for (const s of list.items) {
    const li = document.createElement("li");
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.session = String(s.session_id);
    b.title = s.title || "Session " + s.session_id;
    const title = document.createElement("span");
    title.textContent = b.title;
    const when = document.createElement("small");
    when.textContent = new Date(s.created_at).toLocaleString();
    b.append(title, when);
    if (s.session_id === state.session) b.setAttribute("aria-current", "true");
    b.addEventListener("click", () => openSession(s.session_id).catch((err) => setStatus(err.message, true)));
    li.append(b);
    ul.append(li);
  }
}

function markCurrent() {
  $("sessions").querySelectorAll("button").forEach((b) => {
    if (b.dataset.session === String(state.session)) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  });
}

function newSession() {
  state.session = null;
  state.responses = new Set();
  $("turns").replaceChildren();
  $("empty").hidden = false;
  markCurrent();
  setStatus("");
}

// openSession shows a past session's turns, to read or to continue.
async function openSession(id) {
  showSession(await json("GET", "/user/practice/sessions/" + id));
  setStatus("");
}

// showSession puts the page on s, a session as read (GET), showing its
// recorded turns.
function showSession(s) {
  state.session = s.session_id;
  state.responses = new Set(s.responses.map((r) => r.response_id));
  $("turns").replaceChildren();
  $("empty").hidden = true;
  if (s.class_id) $("class").value = String(s.class_id);
  const turns = new Map();
  for (const r of s.responses) {
    if (!turns.has(r.turn)) turns.set(r.turn, []);
    turns.get(r.turn).push(r);
  }
  for (const [, results] of [...turns].sort((a, b) => a[0] - b[0])) {
    const turn = renderTurn(results[0].prompt_text, results.map((r) => r.model_name));
    for (const r of results) turn.finish(r);
    turn.el.dataset.recorded = "true";
  }
  markCurrent();
}

// A turn on screen: the prompt, then a column per model.

function renderTurn(prompt, models) {
  $("empty").hidden = true;
  const el = document.createElement("article");
  el.className = "turn";
  const p = document.createElement("p");
  p.className = "prompt";
  p.textContent = prompt;
  const cols = document.createElement("div");
  cols.className = "columns";
  const columns = new Map();
  for (const name of models) {
    const col = document.createElement("section");
    col.className = "column";
    col.dataset.model = name;
    col.dataset.state = "streaming";
    col.dataset.deltas = "0";
    const h = document.createElement("h3");
    h.textContent = name;
    const text = document.createElement("div");
    text.className = "text";
    const foot = document.createElement("footer");
    col.append(h, text, foot);
    cols.append(col);
    columns.set(name, { col, h, text, foot });
  }
  el.append(p, cols);
  $("turns").append(el);
  el.scrollIntoView({ block: "end" });

  const column = (name) => columns.get(name);
  return {
    el,
    delta(name, text) {
      const c = column(name);
      if (!c) return;
      c.text.textContent += text;
      c.col.dataset.deltas = String(Number(c.col.dataset.deltas) + 1);
    },
    // finish shows a model's result: a done event or a recorded response.
    finish(r) {
      const c = column(r.model_name);
      if (!c) return;
      if (r.error) {
        this.fail(r.model_name, r.error);
        return;
      }
      c.text.textContent = r.response_text;
      c.col.dataset.state = "done";
      c.foot.textContent = r.token_usage.total_tokens + " tokens · " + r.latency_ms + " ms";
      if (r.is_primary && !c.h.querySelector(".primary")) {
        const badge = document.createElement("span");
        badge.className = "primary";
        badge.textContent = "primary";
        c.h.append(badge);
      }
    },
    fail(name, error) {
      const c = column(name);
      if (!c) return;
      c.col.dataset.state = "error";
      c.text.textContent = error.message;
      c.foot.textContent = error.kind;
    },
    // abort marks the columns still streaming as failed for reason.
    abort(reason) {
      for (const [name, c] of columns) {
        if (c.col.dataset.state === "streaming") this.fail(name, { kind: "error", message: reason });
      }
    },
    // interrupt marks the columns still streaming as cut short, keeping
    // what they had received.
    interrupt() {
      for (const [, c] of columns) {
        if (c.col.dataset.state !== "streaming") continue;
        c.col.dataset.state = "error";
        c.foot.textContent = "interrupted";
      }
    },
  };
}

// readEvents parses a text/event-stream body, calling onEvent(name, data)
// for each event; comments (heartbeats) are skipped.
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const at = line.indexOf(":");
        const field = at < 0 ? line : line.slice(0, at);
        let value = at < 0 ? "" : line.slice(at + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") name = value;
        else if (field === "data") data.push(value);
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}

function setStatus(text, bad) {
  $("status").textContent = text;
  $("status").classList.toggle("error", Boolean(bad));
}

// send runs a turn: the first of a new session (run), or the next (chat).
async function send() {
  const prompt = $("prompt").value.trim();
  if (!prompt || state.busy) return;
  const models = chosenModels();
  if (!models.length) return setStatus("Pick at least one model.", true);
  let path;
  if (state.session) {
    path = "/user/practice/sessions/" + state.session + "/chat";
  } else {
    const cls = $("class").value;
    if (!cls) return setStatus("Join a class first (ask your teacher for an invite code).", true);
    localStorage.setItem("lectern.class", cls);
    path = "/user/practice/sessions/run?class_id=" + encodeURIComponent(cls);
  }
  state.busy = true;
  $("send").disabled = true;
  $("prompt").value = "";
  setStatus("Asking " + models.join(", ") + "…");
  const turn = renderTurn(prompt, models);
  const continuing = state.session; // null: a first turn, whose session exists only once the turn is recorded
  // The session the stream names becomes the page's only once the turn is
  // recorded (a failed turn records nothing, not even a new session), and
  // only while the turn is on the page (New, or another session opened, has
  // not replaced it).
  let session = null;
  let recorded = false; // the turn event came: the turn is recorded
  let failure = ""; // a turn-level error event: nothing is recorded
  let cause = null; // what ended the turn before its turn event
  try {
    const res = await request("POST", path, { prompt_text: prompt, model_names: models }, { headers: { Accept: "text/event-stream" } });
    if (!res.ok || !(res.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
      const data = await res.json().catch(() => null);
      throw new APIError(res.status, detailText(data, res.status));
    }
    await readEvents(res.body, (name, data) => {
      switch (name) {
        case "session":
          session = data.session_id;
          break;
        case "delta":
          turn.delta(data.model_name, data.text);
          break;
        case "done":
          turn.finish(data);
          break;
        case "error":
          if (data.model_name) turn.fail(data.model_name, data.error);
          else failure = detailText(data, 502);
          break;
        case "turn":
          for (const r of data.results) turn.finish(r);
          session = data.session_id;
          recorded = true;
          if (turn.el.isConnected) {
            if (!continuing) state.responses = new Set();
            for (const r of data.results) state.responses.add(r.response_id);
          }
          break;
      }
    });
  } catch (err) {
    cause = err;
  }
  try {
    if (recorded) {
      turn.el.dataset.recorded = "true";
      if (turn.el.isConnected) {
        state.session = session;
        setStatus("");
      }
      await loadSessions().catch((err) => turn.el.isConnected && setStatus(err.message, true));
      return;
    }
    if (!turn.el.isConnected) return; // the page has moved on
    turn.el.dataset.recorded = "false";
    if (failure || cause instanceof APIError) {
      // Refused, or every model failed: nothing is recorded.
      turn.abort(failure || cause.message);
      notRecorded(turn, prompt, continuing);
      setStatus(failure || cause.message, true);
      return;
    }
    // Interrupted: the stream ended (the connection closed, or the body
    // ended) before the event that says the turn is recorded, and without a
    // turn-level error. The server records a turn once its models have
    // ended, whether or not the page still listens, and nothing in the
    // stream before that event tells whether it will: the page takes the
    // turn as not recorded, unless its session, read again, holds it.
    turn.interrupt();
    await settleInterrupted(turn, prompt, continuing, session);
  } finally {
    state.busy = false;
    $("send").disabled = false;
  }
}

// notRecorded leaves the page as it was before a turn that was not
// recorded: a first turn's session does not exist, so the page is back on
// a new conversation; a later turn's session does, and the page stays on
// it, the turn shown as it ended. Either way the prompt goes back to be
// sent again (unless another one is being written).
function notRecorded(turn, prompt, continuing) {
  if (!continuing) {
    turn.el.remove();
    state.session = null;
    state.responses = new Set();
    $("empty").hidden = $("turns").querySelector("article") !== null;
    markCurrent();
  }
  if (!$("prompt").value) $("prompt").value = prompt;
}

// settleInterrupted settles an interrupted turn: it reads the session again
// (the one the turn continued, or else the one its stream named; none if the
// stream ended before naming it). If the session has the turn, recorded
// after all, the page shows the session as recorded; otherwise the turn is
// not recorded as far as the page can tell (it may still be, later: the
// session list will then show it).
async function settleInterrupted(turn, prompt, continuing, named) {
  const id = continuing || named;
  let found = null;
  if (id) {
    setStatus("The answer was interrupted: checking whether the turn was recorded…");
    try {
      const signal = typeof AbortSignal.timeout === "function" ? AbortSignal.timeout(15000) : undefined;
      const s = await json("GET", "/user/practice/sessions/" + id, undefined, { signal });
      // Its responses the page did not show before, to this prompt.
      if (s.responses.some((r) => !state.responses.has(r.response_id) && r.prompt_text === prompt)) found = s;
    } catch {
      // 404: not recorded (not yet, at least); or the server cannot be reached.
    }
    if (!turn.el.isConnected) return; // the page has moved on meanwhile
  }
  if (found) {
    showSession(found);
    setStatus("The answer was interrupted, but the turn was recorded: it is shown as the server has it.");
    await loadSessions().catch(() => {});
    return;
  }
  notRecorded(turn, prompt, continuing);
  setStatus("The answer was interrupted before the turn was recorded: your prompt is back in the box, to send again.", true);
}

function start() {
  $("tab-login").addEventListener("click", () => selectTab(false));
  $("tab-signup").addEventListener("click", () => selectTab(true));
  guarded($("login-form"), $("signin-error"), async () => {
    saveTokens(await json("POST", "/user/login", { email: $("login-email").value, password: $("login-password").value }, { anonymous: true }));
    await enter();
  });
  guarded($("code-form"), $("signin-error"), async () => {
    state.email = $("signup-email").value;
    const sent = await json("POST", "/user/email/send-code", { email: state.email }, { anonymous: true });
    state.verificationToken = sent.verification_token;
    $("code-sent-to").textContent = state.email;
    $("code-form").hidden = true;
    $("verify-form").hidden = false;
    $("signup-code").focus();
  });
  guarded($("verify-form"), $("signin-error"), async () => {
    const v = await json("POST", "/user/email/verify-code",
      { email: state.email, code: $("signup-code").value.trim(), verification_token: state.verificationToken }, { anonymous: true });
    state.verifiedToken = v.email_verified_token;
    $("verify-form").hidden = true;
    $("signup-form").hidden = false;
    $("signup-name").focus();
  });
  guarded($("signup-form"), $("signin-error"), async () => {
    saveTokens(await json("POST", "/user/signup", {
      email: state.email, password: $("signup-password").value, name: $("signup-name").value,
      email_verified_token: state.verifiedToken,
    }, { anonymous: true }));
    await enter();
  });
  guarded($("join-form"), $("status"), async () => {
    const e = await json("POST", "/user/class/join", { code: $("join-code").value.trim() });
    $("join-code").value = "";
    await loadClasses(e.class_id);
    setStatus("Joined class " + e.class_id + ".");
  });
  $("logout").addEventListener("click", async () => {
    if (state.refresh) await json("POST", "/user/logout", { refresh_token: state.refresh }, { anonymous: true }).catch(() => {});
    forgetTokens();
    newSession();
    showSignin();
  });
  $("new-session").addEventListener("click", newSession);
  $("prompt-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    send();
  });
  $("prompt").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      send();
    }
  });

  if (!state.access) return showSignin();
  enter().catch((err) => {
    forgetTokens();
    showSignin(err.status === 401 ? "" : err.message);
  });
}

start();
