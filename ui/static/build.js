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
    if (end.state) setState(end.state);
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
