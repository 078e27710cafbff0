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
})();
