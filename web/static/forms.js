// Sluice console: the enhancements of the forms about people and access.
// Every form works without this script; it only changes attributes and
// text of elements the server drew (CSP: no inline script).
(function () {
  "use strict";

  // A role choice marks the description of the chosen role.
  document.querySelectorAll("dl[data-roles-for]").forEach(function (dl) {
    var select = document.getElementById(dl.getAttribute("data-roles-for"));
    if (!select) { return; }
    function mark() {
      dl.querySelectorAll("[data-role]").forEach(function (d) {
        d.classList.toggle("chosen", d.getAttribute("data-role") === select.value);
      });
    }
    select.addEventListener("change", mark);
    mark();
  });

  // Fields marked data-show-when="select=value" show only while the select
  // of that id holds that value; without the script they always show.
  document.querySelectorAll("[data-show-when]").forEach(function (field) {
    var rule = field.getAttribute("data-show-when").split("=");
    var select = document.getElementById(rule[0]);
    if (!select) { return; }
    function follow() {
      // A field with an error stays visible, so its message is seen.
      field.hidden = select.value !== rule[1] && !field.classList.contains("invalid");
    }
    select.addEventListener("change", function () {
      field.classList.remove("invalid");
      follow();
    });
    follow();
  });

  // The allowed-apps picker: a filter box narrows the list of checkboxes
  // to the apps whose name holds what is typed. Ticked apps always stay
  // in view (and, like every checkbox, are sent whether in view or not).
  document.querySelectorAll("[data-picker]").forEach(function (picker) {
    var filter = picker.querySelector("[data-picker-filter]");
    var tools = picker.querySelector("[data-picker-tools]");
    var count = picker.querySelector("[data-picker-count]");
    var items = picker.querySelectorAll("li[data-app]");
    if (!filter || !items.length) { return; }
    tools.hidden = false;
    function apply() {
      var q = filter.value.trim().toLowerCase();
      var shown = 0, ticked = 0;
      items.forEach(function (li) {
        var box = li.querySelector("input[type=checkbox]");
        var match = q === "" || li.getAttribute("data-app").toLowerCase().indexOf(q) >= 0;
        if (box.checked) { ticked++; }
        li.hidden = !(match || box.checked);
        li.classList.toggle("picked-hidden", !match && box.checked);
        if (!li.hidden) { shown++; }
      });
      if (count) {
        count.hidden = q === "";
        count.textContent = shown + " of " + items.length + " apps shown, " + ticked + " ticked";
      }
    }
    filter.addEventListener("input", apply);
    // Enter in the filter box filters; it must not save the form.
    ["keydown", "keypress"].forEach(function (type) {
      filter.addEventListener(type, function (ev) {
        if (ev.key === "Enter") { ev.preventDefault(); }
      });
    });
    picker.addEventListener("change", apply);
    apply();
  });
})();
