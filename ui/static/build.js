// Follows a build from the API's event stream: the progress bar, the state and the log.
// EventSource reconnects by itself and sends Last-Event-ID, so the stream resumes. The URL
// has no ?after=, which would win over that header on every reconnect; the events the page
// already shows are skipped by their seq instead.
(function () {
  "use strict";
  var root = document.getElementById("build");
  if (!root || root.getAttribute("data-finished") === "true" || !window.EventSource) return;
  var id = root.getAttribute("data-build-id");
  var lastSeq = parseInt(root.getAttribute("data-last-seq") || "0", 10);
  var progress = document.getElementById("progress");
  var state = document.getElementById("build-state");
  var log = document.getElementById("log");
  var live = document.getElementById("build-live");
  var duration = document.getElementById("build-duration");

  // As the server writes a duration: 850ms, 42s, 3m5s, 1h10m.
  function formatDuration(ms) {
    if (ms < 1000) return Math.max(0, Math.round(ms)) + "ms";
    var s = Math.round(ms / 1000);
    if (s < 3600) return (s >= 60 ? Math.floor(s / 60) + "m" : "") + (s % 60) + "s";
    var m = Math.round(s / 60);
    return Math.floor(m / 60) + "h" + (m % 60) + "m0s";
  }
  function showDuration(started, finished) {
    var from = Date.parse(started || "");
    if (isNaN(from)) return;
    var to = finished ? Date.parse(finished) : Date.now();
    if (!isNaN(to)) duration.textContent = formatDuration(to - from);
  }
  // While the build runs, its duration counts up.
  var ticker = setInterval(function () { showDuration(duration.getAttribute("data-started")); }, 1000);

  function setState(s) {
    state.textContent = s;
    state.className = "state state-" + s;
  }
  function read(e) {
    try { return JSON.parse(e.data); } catch (err) { return null; }
  }

  var source = new EventSource("/api/v1/builds/" + encodeURIComponent(id) + "/events");
  source.addEventListener("open", function () { live.hidden = true; });
  source.addEventListener("progress", function (e) {
    var ev = read(e);
    if (!ev || ev.seq <= lastSeq) return;
    lastSeq = ev.seq;
    if (typeof ev.progress === "number") {
      progress.value = ev.progress;
      progress.textContent = ev.progress + " %";
    }
    if (ev.state) setState(ev.state);
    if (ev.started_at && !duration.hasAttribute("data-started")) duration.setAttribute("data-started", ev.started_at);
    var li = document.createElement("li");
    li.setAttribute("data-seq", String(ev.seq));
    li.className = "level-" + (ev.level || "info");
    var time = document.createElement("time");
    var at = new Date(ev.time);
    time.dateTime = ev.time;
    time.textContent = isNaN(at) ? "" : at.toISOString().slice(11, 19);
    var step = document.createElement("span");
    step.className = "step";
    step.textContent = ev.step || "";
    var msg = document.createElement("span");
    msg.className = "message";
    msg.textContent = ev.message || "";
    li.append(time, " ", step, " ", msg);
    log.appendChild(li);
    log.scrollTop = log.scrollHeight;
  });
  source.addEventListener("end", function (e) {
    source.close();
    var end = read(e) || {};
    clearInterval(ticker);
    if (end.state) setState(end.state);
    if (end.started_at) showDuration(end.started_at, end.finished_at);
    root.setAttribute("data-finished", "true");
    if (end.reason) {
      var reason = document.getElementById("build-reason");
      reason.textContent = end.reason;
      reason.hidden = false;
    }
    if (end.state === "succeeded") {
      progress.value = 100;
      progress.textContent = "100 %";
      document.getElementById("build-done").hidden = false;
    }
  });
  source.addEventListener("error", function () {
    if (source.readyState === EventSource.CLOSED) {
      live.textContent = "Live updates stopped. Reload the page to see the latest state.";
    } else {
      live.textContent = "Connection lost; reconnecting…";
    }
    live.hidden = false;
  });
})();
