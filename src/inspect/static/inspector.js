// anima's inspector: live updates of the timeline (the soul stream, through EventSource) and
// the chat pane's send. Every text goes into the page as textContent, never as markup.
"use strict";

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

function when(ms) {
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

function turnItem(t) {
  const li = el("li", "turn");
  li.dataset.trace = t.trace;
  const a = el("a", null, when(t.at));
  a.href = "/inspect/turn/" + encodeURIComponent(t.trace);
  li.append(a, " ", el("span", "kind", t.kind), " ", el("span", "person", t.person || ""), " ");
  const th = el("a", "thread", t.thread);
  th.href = "/inspect/thread?thread=" + encodeURIComponent(t.thread);
  li.append(th, " ", el("span", "process", t.process), " ", el("span", "reply", t.reply || ""));
  return li;
}

async function refreshTimeline(list) {
  const thread = list.dataset.thread;
  const url = "/api/inspect/turns?limit=50" + (thread ? "&thread=" + encodeURIComponent(thread) : "");
  const answer = await fetch(url, { credentials: "same-origin" });
  if (!answer.ok) return;
  const json = await answer.json();
  list.replaceChildren(...json.turns.map(turnItem));
  const empty = document.querySelector("p.empty");
  if (empty && json.turns.length) empty.remove();
}

function follow(list) {
  // Only the newest page follows the stream: an older page stays as it was asked for.
  if (new URLSearchParams(location.search).has("before")) return;
  let pending = null;
  const source = new EventSource("/api/inspect/stream");
  source.onmessage = (event) => {
    let record;
    try { record = JSON.parse(event.data); } catch (_) { return; }
    if (list.dataset.thread && record.thread !== list.dataset.thread) return;
    clearTimeout(pending);
    pending = setTimeout(() => refreshTimeline(list), 200);
  };
  // Following: the stream is open (a test waits for this before a turn happens).
  source.onopen = () => document.body.classList.add("live");
  // The stream ended (the server dropped a lagging page, or stopped): catch up once it is back.
  source.onerror = () => document.body.classList.remove("live");
  source.addEventListener("open", () => refreshTimeline(list));
}

function chat(form) {
  const exchange = document.getElementById("exchange");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new URLSearchParams(new FormData(form));
    const said = data.get("message");
    const item = el("li", "pending");
    item.append(el("p", "said", said));
    exchange.prepend(item);
    form.message.value = "";
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      const answer = await fetch(form.action, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Accept": "application/json" },
        body: data,
      });
      if (!answer.ok) {
        item.append(el("p", "error", "refused: " + answer.status + " " + (await answer.text())));
        return;
      }
      const json = await answer.json();
      item.append(el("p", "reply", json.reply), el("p", "monologue", json.monologue));
      if (json.error) item.append(el("p", "error", json.error));
      item.className = "answered";
    } finally {
      button.disabled = false;
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const list = document.getElementById("timeline");
  if (list) follow(list);
  const form = document.getElementById("chat");
  if (form) chat(form);
});
