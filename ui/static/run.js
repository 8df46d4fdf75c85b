// Follows a run from the API's event stream: its output as it comes and its end.
// EventSource reconnects by itself and sends Last-Event-ID, so the stream resumes; the
// pieces the page already shows are skipped by their seq.
(function () {
  "use strict";
  var root = document.getElementById("run");
  if (!root || root.getAttribute("data-finished") === "true" || !window.EventSource) return;
  var deployment = root.getAttribute("data-deployment-id");
  var id = root.getAttribute("data-run-id");
  var lastSeq = parseInt(root.getAttribute("data-last-seq") || "0", 10);
  var output = document.getElementById("output");
  var state = document.getElementById("run-state");
  var reason = document.getElementById("run-reason");
  var cancel = document.getElementById("run-cancel");

  function read(e) {
    try { return JSON.parse(e.data); } catch (err) { return null; }
  }
  function setState(s) {
    state.textContent = s;
    state.className = "state state-" + s;
  }
  var source = new EventSource("/api/v1/deployments/" + encodeURIComponent(deployment) + "/runs/" + encodeURIComponent(id) + "/events");
  source.addEventListener("output", function (e) {
    var ev = read(e);
    if (!ev || ev.seq <= lastSeq) return;
    lastSeq = ev.seq;
    if (ev.state) setState(ev.state);
    var span = document.createElement("span");
    span.className = "stream-" + ev.stream;
    span.setAttribute("data-seq", String(ev.seq));
    span.textContent = ev.data + (ev.stream === "fedhost" ? "\n" : "");
    var atEnd = output.scrollTop + output.clientHeight >= output.scrollHeight - 4;
    output.appendChild(span);
    if (atEnd) output.scrollTop = output.scrollHeight;
  });
  source.addEventListener("end", function (e) {
    source.close();
    var run = read(e);
    if (!run) return;
    setState(run.state);
    reason.textContent = run.reason || "—";
    if (cancel) cancel.hidden = true;
    // The download link and the final facts come with the page.
    if (!run.sensitive && run.output_bytes > 0) window.location.reload();
  });
}());
