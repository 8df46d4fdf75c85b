// Moves the link's token from the address's fragment, which no browser sends to a
// server, into the form, and takes it out of the address bar and history.
(function () {
  "use strict";
  var field = document.getElementById("link-token");
  if (!field) return;
  var token = window.location.hash.slice(1);
  if (token) {
    field.value = token;
    history.replaceState(null, "", window.location.pathname);
  }
  if (!field.value) {
    var missing = document.getElementById("link-missing");
    if (missing) missing.hidden = false;
  }
})();
