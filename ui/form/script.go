package form

// Script is the JavaScript a page embeds (in a <script> element, after the form or
// deferred) to show an app's options while its enable switch is on, and to add and
// remove the rows of lists. Without it the form still submits every field; the add and
// remove buttons stay hidden.
const Script = `(function () {
  "use strict";
  function switchNamed(scope, name) {
    var boxes = (scope.closest("form") || document).querySelectorAll('input[type="checkbox"]');
    for (var i = 0; i < boxes.length; i++) {
      if (boxes[i].name === name) return boxes[i];
    }
    return null;
  }
  // keepErrors leaves in view the sections the server showed for their errors.
  function syncSections(root, keepErrors) {
    root.querySelectorAll("[data-show-when], [data-show-unless]").forEach(function (el) {
      if (keepErrors && el.querySelector(".field-error")) return;
      var when = el.hasAttribute("data-show-when");
      var box = switchNamed(el, el.getAttribute(when ? "data-show-when" : "data-show-unless"));
      if (box) el.hidden = when ? !box.checked : box.checked;
    });
  }
  function syncList(list) {
    var rows = list.querySelectorAll(":scope > .array-rows > [data-array-row]");
    var min = parseInt(list.getAttribute("data-min-items") || "0", 10);
    var max = parseInt(list.getAttribute("data-max-items") || "-1", 10);
    rows.forEach(function (row) {
      var remove = row.querySelector(":scope > [data-array-remove]");
      remove.hidden = false;
      remove.disabled = rows.length <= min;
    });
    var add = list.querySelector(":scope > [data-array-add]");
    add.hidden = false;
    add.disabled = max >= 0 && rows.length >= max;
  }
  function fillIndex(root, token, index) {
    root.querySelectorAll("*").forEach(function (el) {
      for (var i = 0; i < el.attributes.length; i++) {
        var a = el.attributes[i];
        if (a.value.indexOf(token) >= 0) a.value = a.value.split(token).join(index);
      }
      if (el.content) fillIndex(el.content, token, index);
    });
  }
  document.addEventListener("click", function (e) {
    var add = e.target.closest("[data-array-add]");
    var remove = e.target.closest("[data-array-remove]");
    var list;
    if (add) {
      list = add.closest("[data-array]");
      var tpl = list.querySelector(":scope > template[data-array-template]");
      var next = parseInt(list.getAttribute("data-next-index") || "0", 10);
      var rowFragment = tpl.content.cloneNode(true);
      fillIndex(rowFragment, tpl.getAttribute("data-index-token"), String(next));
      var row = rowFragment.firstElementChild;
      list.setAttribute("data-next-index", String(next + 1));
      list.querySelector(":scope > .array-rows").appendChild(rowFragment);
      row.querySelectorAll("[data-array]").forEach(syncList);
      syncSections(row);
      syncList(list);
      var first = row.querySelector("input:not([type=hidden]), select, textarea");
      if (first) first.focus();
    } else if (remove) {
      list = remove.closest("[data-array]");
      remove.closest("[data-array-row]").remove();
      syncList(list);
      list.querySelector(":scope > [data-array-add]").focus();
    }
  });
  document.addEventListener("change", function (e) {
    if (e.target.type === "checkbox") syncSections(e.target.form || document);
  });
  function init() {
    syncSections(document, true);
    document.querySelectorAll("[data-array]").forEach(syncList);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
`
