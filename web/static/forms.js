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
})();
