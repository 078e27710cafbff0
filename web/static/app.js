// Sluice console: small progressive enhancements. Every page works without
// this script; it never builds markup from strings, so the CSP needs no
// 'unsafe-inline' or 'unsafe-eval'.
(function () {
  "use strict";

  // Filter selects marked data-autosubmit submit their form when changed.
  document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
    el.addEventListener("change", function () {
      if (el.form) { el.form.requestSubmit ? el.form.requestSubmit() : el.form.submit(); }
    });
  });

  // Buttons marked data-copy copy the text of the element they name.
  document.querySelectorAll("button[data-copy]").forEach(function (btn) {
    btn.hidden = false;
    btn.addEventListener("click", function () {
      var src = document.getElementById(btn.getAttribute("data-copy"));
      if (!src || !navigator.clipboard) { return; }
      navigator.clipboard.writeText(src.textContent.trim()).then(function () {
        btn.textContent = "Copied";
      });
    });
  });

  // Focus the first invalid field, so keyboard and screen reader users land
  // on the message.
  var invalid = document.querySelector("[aria-invalid='true']");
  if (invalid) { invalid.focus(); }
})();
