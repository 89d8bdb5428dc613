// Live updates: the websocket only says "something changed" (with a sequence number);
// each live section re-reads its own state over HTTP (hx-trigger="ark-event from:body"),
// so a missed message or a reconnect costs a re-read, never a stale page.
(function () {
  const body = document.body;
  const path = body.dataset.ws;
  if (!path) return;
  let lastSeq = parseInt(body.dataset.lastSeq || "0", 10);
  let delay = 500;
  let opened = 0;
  const status = () => document.getElementById("live-status");

  // News heard so far (messages and reconnects), and how much of it each htmx request had heard when it
  // was sent. A swap can put older state on the page than the news already heard: a form's answer
  // rendered before a message arrived, or a live section swapped in while a message arrived between
  // htmx's swap and its settle (20 ms later), when the new section does not listen yet and the old one
  // is gone. So when a swap settles after news it had not heard, every live section reads again
  // (docs/operations.md, "Live updates that stay up").
  let heard = 0;
  const heardWhenSent = new WeakMap();

  function announce(detail) {
    body.dispatchEvent(new CustomEvent("ark-event", { detail: detail, bubbles: true }));
  }

  function news(detail) {
    heard += 1;
    announce(detail);
  }

  body.addEventListener("htmx:beforeRequest", function (event) {
    heardWhenSent.set(event.detail.xhr, heard);
  });
  body.addEventListener("htmx:afterSettle", function (event) {
    const xhr = event.detail.xhr;
    if (!heardWhenSent.has(xhr)) return;  // one swap settles several elements: read again once
    const sent = heardWhenSent.get(xhr);
    heardWhenSent.delete(xhr);
    if (sent < heard) {
      body.dataset.rereads = String(parseInt(body.dataset.rereads || "0", 10) + 1);
      announce({ resync: true, missed: heard - sent });
    }
  });

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + path);
    socket.onopen = function () {
      delay = 500;
      opened += 1;
      body.dataset.wsOpen = "1";
      if (status()) { status().textContent = "●"; status().classList.add("on"); status().title = "live updates"; }
      if (opened > 1) {
        // A reconnect: say so, and re-read every live section (messages may have been missed meanwhile).
        body.dataset.reconnects = String(opened - 1);
        if (status()) status().title = "live updates: reconnected at " + new Date().toLocaleTimeString();
        news({ resync: true });
      }
    };
    socket.onmessage = function (message) {
      const data = JSON.parse(message.data);
      const gap = data.seq > lastSeq + 1 && lastSeq > 0;
      lastSeq = Math.max(lastSeq, data.seq);
      body.dataset.lastSeq = String(lastSeq);
      news(Object.assign({ resync: gap }, data));
    };
    socket.onclose = function () {
      if (status()) {
        status().textContent = "○"; status().classList.remove("on");
        status().title = "live updates: disconnected, reconnecting";
      }
      delete body.dataset.wsOpen;
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();

// Charts: each [data-chart] names a <script type="application/json"> holding a plotly figure.
// Drawn on load and again whenever htmx swaps in a fresh copy of a live section.
(function () {
  function draw(root) {
    if (!window.Plotly) return;
    (root || document).querySelectorAll("[data-chart]").forEach(function (el) {
      const data = document.getElementById(el.dataset.chart);
      if (!data) return;
      const figure = JSON.parse(data.textContent);
      window.Plotly.react(el, figure.data || [], figure.layout || {}, { displaylogo: false, responsive: true });
      el.dataset.drawn = "1";
    });
  }
  window.addEventListener("load", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.target); });
})();

// Dialogs: a button with data-open-dialog="<id>" opens it; one marked data-open-on-load (a form
// sent back with errors) opens at once.
(function () {
  document.addEventListener("click", function (event) {
    const opener = event.target.closest("[data-open-dialog]");
    if (opener) { document.getElementById(opener.dataset.openDialog).showModal(); return; }
    const closer = event.target.closest("[data-close-dialog]");
    if (closer) closer.closest("dialog").close();
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("dialog[data-open-on-load]").forEach(function (d) { d.showModal(); });
  });
})();
