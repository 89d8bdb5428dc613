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
  let connected = false;
  let reconnectedAt = null;
  const status = () => document.getElementById("live-status");

  // News heard so far (messages and reconnects), and how much of it each htmx request had heard when it
  // was sent. A swap can put older state on the page than the news already heard: a form's answer
  // rendered before a message arrived, or a live section swapped in while a message arrived between
  // htmx's swap and its settle (20 ms later), when the new section does not listen yet and the old one
  // is gone. So when a swap settles after news it had not heard, every live section reads again
  // (docs/operations.md, "Live updates that stay up").
  let heard = 0;
  const heardWhenSent = new WeakMap();

  // A live section's re-read that fails (an error status, no answer) is tried again after 1, 2, 4, 8 and
  // 16 s, then left to the next message (which starts a new round); meanwhile the live dot shows the page
  // as degraded.
  const RETRY_MS = [1000, 2000, 4000, 8000, 16000];
  const failing = new Map();  // live section id -> what its last re-read answered
  let retries = 0;
  let retryTimer = null;
  let gaveUp = false;
  const liveRequests = new WeakMap();  // xhr -> the id of the live section it re-reads

  function show() {
    const el = status();
    if (!el) return;
    el.classList.toggle("on", connected && failing.size === 0);
    el.classList.toggle("degraded", connected && failing.size > 0);
    if (!connected) {
      el.textContent = "○";
      el.title = "live updates: disconnected, reconnecting";
    } else if (failing.size > 0) {
      const why = Array.from(failing.values()).join(", ");
      el.textContent = "◐";
      el.title = gaveUp
        ? "live updates: re-reading this page failed " + (RETRY_MS.length + 1) + " times (" + why +
          "); the next change tries again, or reload the page"
        : "live updates: re-reading this page failed (" + why + "), trying again";
    } else {
      el.textContent = "●";
      el.title = reconnectedAt ? "live updates: reconnected at " + reconnectedAt : "live updates";
    }
  }

  function announce(detail) {
    const send = () => body.dispatchEvent(new CustomEvent("ark-event", { detail: detail, bubbles: true }));
    // htmx makes the live sections listen when the document is ready; a socket can answer before that.
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", send, { once: true });
    else send();
  }

  function news(detail) {
    heard += 1;
    if (gaveUp) { retries = 0; gaveUp = false; }  // its re-read starts a new round of retries
    announce(detail);
  }

  body.addEventListener("htmx:beforeRequest", function (event) {
    const xhr = event.detail.xhr;
    heardWhenSent.set(xhr, heard);
    const elt = event.detail.elt;
    if (elt && elt.id && elt.matches('[hx-trigger*="ark-event"]')) liveRequests.set(xhr, elt.id);
  });
  body.addEventListener("htmx:afterSettle", function (event) {
    const xhr = event.detail.xhr;
    if (!heardWhenSent.has(xhr)) return;  // one swap settles several elements: read again once
    const sent = heardWhenSent.get(xhr);
    heardWhenSent.delete(xhr);
    if (liveRequests.has(xhr) && failing.delete(liveRequests.get(xhr))) {
      if (failing.size === 0) {
        retries = 0;
        gaveUp = false;
        delete body.dataset.liveDegraded;
      }
      show();
    }
    if (sent < heard) {
      body.dataset.rereads = String(parseInt(body.dataset.rereads || "0", 10) + 1);
      announce({ resync: true, missed: heard - sent });
    }
  });

  function rereadFailed(event, why) {
    const id = liveRequests.get(event.detail.xhr);
    if (id === undefined) return;  // a form's own request: htmx and the form show its error
    failing.set(id, why);
    body.dataset.liveDegraded = "1";
    if (retryTimer === null && retries < RETRY_MS.length) {
      retryTimer = setTimeout(function () {
        retryTimer = null;
        body.dataset.rereadRetries = String(parseInt(body.dataset.rereadRetries || "0", 10) + 1);
        announce({ resync: true, retry: retries });
      }, RETRY_MS[retries]);
      retries += 1;
    } else if (retryTimer === null) {
      gaveUp = true;
    }
    show();
  }
  body.addEventListener("htmx:responseError", function (event) {
    rereadFailed(event, "HTTP " + event.detail.xhr.status);
  });
  body.addEventListener("htmx:sendError", function (event) { rereadFailed(event, "no answer"); });

  function joined(seq) {
    // The socket's first message: the newest event of its group. Anything published after the page was
    // rendered (or while a reconnecting page had no socket) and before the socket joined was pushed to no
    // one, so every live section re-reads. A reconnect always re-reads, and says so.
    const missed = seq > lastSeq;
    lastSeq = Math.max(lastSeq, seq);
    body.dataset.lastSeq = String(lastSeq);
    if (opened > 1) {
      body.dataset.reconnects = String(opened - 1);
      reconnectedAt = new Date().toLocaleTimeString();
      show();
    }
    if (missed || opened > 1) {
      body.dataset.joinResyncs = String(parseInt(body.dataset.joinResyncs || "0", 10) + 1);
      news({ resync: true, joined: true });
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + path);
    socket.onopen = function () {
      delay = 500;
      opened += 1;
      connected = true;
      body.dataset.wsOpen = "1";
      show();
    };
    socket.onmessage = function (message) {
      const data = JSON.parse(message.data);
      if (data.joined) { joined(data.seq); return; }
      const gap = data.seq > lastSeq + 1 && lastSeq > 0;
      lastSeq = Math.max(lastSeq, data.seq);
      body.dataset.lastSeq = String(lastSeq);
      news(Object.assign({ resync: gap }, data));
    };
    socket.onclose = function () {
      connected = false;
      delete body.dataset.wsOpen;
      show();
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    };
  }
  // Connect once the page's live sections listen: htmx sets up hx-trigger on DOMContentLoaded, and a socket's
  // first message (the join) may ask them to re-read before that on a fast socket.
  let started = false;
  function start() { if (!started) { started = true; connect(); } }
  document.addEventListener("DOMContentLoaded", start);
  window.addEventListener("load", start);
  if (document.readyState === "complete") start();
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
