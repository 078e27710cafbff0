// Sluice console: small progressive enhancements. Every page works without
// this script; it never builds markup from strings (only text and
// attributes of elements the server drew), so the CSP needs no
// 'unsafe-inline' or 'unsafe-eval'.
(function () {
  "use strict";

  // Filter selects and check boxes marked data-autosubmit submit their
  // form when changed.
  document.querySelectorAll("select[data-autosubmit], input[data-autosubmit]").forEach(function (el) {
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

  // ---------------------------------------------------------------------
  // Numbers, the way the server writes them: 1,234,567.
  function groupDigits(s) {
    s = String(s);
    var out = "";
    for (var i = 0; i < s.length; i++) {
      if (i > 0 && (s.length - i) % 3 === 0) { out += ","; }
      out += s.charAt(i);
    }
    return out;
  }

  // ---------------------------------------------------------------------
  // Times: <time datetime="...Z"> elements drawn in UTC by the server are
  // shown in the viewer's time zone; the UTC time stays on hover.
  function pad2(n) { return (n < 10 ? "0" : "") + n; }
  function localTime(d) {
    var zone = "";
    try {
      var parts = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(d);
      parts.forEach(function (p) { if (p.type === "timeZoneName") { zone = " " + p.value; } });
    } catch (e) { zone = ""; }
    return d.getFullYear() + "-" + pad2(d.getMonth() + 1) + "-" + pad2(d.getDate()) + " " +
      pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds()) + zone;
  }
  function utcTime(d) {
    return d.getUTCFullYear() + "-" + pad2(d.getUTCMonth() + 1) + "-" + pad2(d.getUTCDate()) + " " +
      pad2(d.getUTCHours()) + ":" + pad2(d.getUTCMinutes()) + ":" + pad2(d.getUTCSeconds()) + " UTC";
  }
  function localizeTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) { return; }
      el.textContent = localTime(d);
      el.title = utcTime(d);
      el.setAttribute("data-localized", "");
    });
  }
  localizeTimes(document);

  // The time labels of server-drawn charts (<text data-t="...Z">) in the
  // viewer's zone too; their <title> keeps the UTC time for hover.
  var DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
  function localizeChartTimes(root) {
    root.querySelectorAll("svg text[data-t]").forEach(function (el) {
      var d = new Date(el.getAttribute("data-t"));
      if (isNaN(d.getTime())) { return; }
      var label = el.getAttribute("data-f") === "day" ? DAYS[d.getDay()] + " " + d.getDate() : pad2(d.getHours()) + ":" + pad2(d.getMinutes());
      if (el.firstChild && el.firstChild.nodeType === 3) { el.firstChild.nodeValue = label; }
      el.setAttribute("data-localized", "");
    });
  }
  localizeChartTimes(document);

  // ---------------------------------------------------------------------
  // The bucket form's plain-language summary. It says what
  // buckets.Summary says on the server (a test checks both agree): the
  // rate syntax below follows buckets.ParseRate.
  var MICRO = 1000000n;
  var MAX_PERMITS_MICRO = 1000000000n * MICRO;
  var MAX_PERIOD = 365 * 86400;
  var UNITS = {};
  var SECOND = { s: 1, human: "second" }, MINUTE = { s: 60, human: "minute" },
    HOUR = { s: 3600, human: "hour" }, DAY = { s: 86400, human: "day" };
  ["s", "sec", "secs", "second", "seconds"].forEach(function (k) { UNITS[k] = SECOND; });
  ["m", "min", "mins", "minute", "minutes"].forEach(function (k) { UNITS[k] = MINUTE; });
  ["h", "hr", "hrs", "hour", "hours"].forEach(function (k) { UNITS[k] = HOUR; });
  ["d", "day", "days"].forEach(function (k) { UNITS[k] = DAY; });

  function onlyDigits(s) { return /^[0-9]*$/.test(s); }

  function parsePermits(s) {
    var dot = s.indexOf(".");
    var whole = dot < 0 ? s : s.slice(0, dot);
    var frac = dot < 0 ? "" : s.slice(dot + 1);
    frac = frac.replace(/0+$/, "");
    if (s === "" || s === "." || !onlyDigits(whole) || !onlyDigits(frac) || frac.length > 6) { return null; }
    whole = whole.replace(/^0+/, "");
    if (whole.length > 10) { return null; }
    while (frac.length < 6) { frac += "0"; }
    return BigInt(whole || "0") * MICRO + BigInt(frac);
  }

  function parsePeriod(s) {
    var m = /^([0-9]*)(.*)$/.exec(s);
    var unit = UNITS[m[2].trim()];
    if (!unit) { return null; }
    var count = 1;
    if (m[1] !== "") {
      var c = m[1].replace(/^0+/, "");
      if (c === "" || c.length > 9) { return null; }
      count = parseInt(c, 10);
    }
    var secs = count * unit.s;
    return secs > MAX_PERIOD ? null : secs;
  }

  // parseRate returns {micro: BigInt, secs: Number} or null.
  function parseRate(s) {
    s = s.trim().split(/\s+/).join(" ").toLowerCase();
    if (s === "" || s.length > 100) { return null; }
    var i = s.indexOf("/"), left, right;
    if (i >= 0) {
      left = s.slice(0, i); right = s.slice(i + 1);
    } else {
      i = s.indexOf(" per ");
      if (i < 0) { return null; }
      left = s.slice(0, i); right = s.slice(i + 5);
    }
    var micro = parsePermits(left.trim());
    var secs = parsePeriod(right.trim());
    if (micro === null || secs === null || micro <= 0n || micro > MAX_PERMITS_MICRO || secs < 1) { return null; }
    return { micro: micro, secs: secs };
  }

  function microDecimal(n) {
    var whole = n / MICRO, frac = n % MICRO;
    var s = groupDigits(whole.toString());
    if (frac !== 0n) {
      var f = frac.toString();
      while (f.length < 6) { f = "0" + f; }
      s += "." + f.replace(/0+$/, "");
    }
    return s;
  }

  function rateHuman(r) {
    var n = r.secs, u = SECOND;
    [DAY, HOUR, MINUTE].some(function (cand) {
      if (r.secs >= cand.s && r.secs % cand.s === 0) { n = r.secs / cand.s; u = cand; return true; }
      return false;
    });
    var permits = microDecimal(r.micro).replace(/,/g, "");
    return n === 1 ? permits + " per " + u.human : permits + " per " + n + " " + u.human + "s";
  }

  function sustainedUnit(secs) {
    if (secs < 60) { return [60, "minute"]; }
    if (secs < 3600) { return [3600, "hour"]; }
    if (secs < 86400) { return [86400, "day"]; }
    if (secs < 7 * 86400) { return [7 * 86400, "week"]; }
    return [365 * 86400, "year"];
  }

  // summary(capacityText, rateText) is buckets.Summary, or "" when either
  // is not valid.
  function summary(capacityText, rateText) {
    var c = String(capacityText).trim();
    if (!/^[0-9]{1,10}$/.test(c)) { return ""; }
    var capacity = BigInt(c);
    if (capacity < 1n || capacity > 1000000000n) { return ""; }
    var r = parseRate(String(rateText));
    if (!r) { return ""; }
    var u = sustainedUnit(r.secs);
    var p = BigInt(r.secs);
    var n = (r.micro * BigInt(u[0]) * 2n + p) / (p * 2n);
    return "bursts of up to " + groupDigits(capacity.toString()) + ", then " + rateHuman(r) + ": " +
      microDecimal(n) + " per " + u[1] + " sustained";
  }

  // For tests and for other pages' scripts.
  window.Sluice = { summary: summary, localizeTimes: localizeTimes };

  // <output data-summary data-capacity="max_permits" data-rate="rate">
  // follows the two fields as the user types.
  document.querySelectorAll("output[data-summary]").forEach(function (out) {
    var cap = document.getElementById(out.getAttribute("data-capacity") || "max_permits");
    var rate = document.getElementById(out.getAttribute("data-rate") || "rate");
    if (!cap || !rate) { return; }
    var empty = out.getAttribute("data-empty") || "";
    function update() {
      var s = summary(cap.value, rate.value);
      out.textContent = s ? s.charAt(0).toUpperCase() + s.slice(1) + "." : empty;
    }
    cap.addEventListener("input", update);
    rate.addEventListener("input", update);
    update();
  });

  // quotaSummary mirrors buckets.QuotaSummary: "10,000 per month, resets
  // on the 1st at 00:00 Europe/Berlin", or "" when the quota is invalid.
  // Whether the zone exists is the server's to say: the sentence names it.
  var quotaWhen = { hour: "every hour at minute 0", day: "every day at 00:00",
    week: "on Mondays at 00:00", month: "on the 1st at 00:00" };
  function quotaSummary(capacity, period, zone) {
    var c = String(capacity).replace(/[,_ ]/g, "");
    if (!/^[0-9]+$/.test(c) || !quotaWhen[period]) { return ""; }
    var n = BigInt(c);
    if (n < 1n || n > 1000000000n) { return ""; }
    zone = String(zone).trim() || "UTC";
    return groupDigits(n.toString()) + " per " + period + ", resets " + quotaWhen[period] + " " + zone;
  }
  window.Sluice.quotaSummary = quotaSummary;

  // The kind select shows a quota's period and zone instead of the rate,
  // and the quota's sentence follows the fields as the user types.
  document.querySelectorAll("select[data-kind]").forEach(function (sel) {
    var form = sel.form;
    function show() {
      var q = sel.value === "quota";
      form.querySelectorAll("[data-rate-fields]").forEach(function (el) { el.hidden = q; });
      form.querySelectorAll("[data-quota-fields]").forEach(function (el) { el.hidden = !q; });
    }
    sel.addEventListener("change", show);
    show();
  });
  document.querySelectorAll("output[data-quota-summary]").forEach(function (out) {
    var ids = ["max_permits", "quota_period", "time_zone"].map(function (id) { return document.getElementById(id); });
    if (ids.some(function (el) { return !el; })) { return; }
    function update() {
      var s = quotaSummary(ids[0].value, ids[1].value, ids[2].value);
      out.textContent = s ? s.charAt(0).toUpperCase() + s.slice(1) + "." : "";
    }
    ids.forEach(function (el) { el.addEventListener("input", update); el.addEventListener("change", update); });
    update();
  });

  // ---------------------------------------------------------------------
  // Live state. An element with data-live-src="URL" is refreshed from that
  // JSON every data-live-interval ms (default 2000) while the page is
  // visible:
  //   one bucket:  {"name": "x", "exists": true, "tokens": 7.9, "capacity": 10, "reserve": 2}
  //   a list:      {"buckets": [{"name": "x", ...}, ...]}
  // Inside it, the element of a bucket is the one with data-bucket="x" (or
  // the element itself for a single bucket). Its [data-live-tokens] shows
  // whole tokens, [data-live-capacity] the capacity, [data-live-reserve-left]
  // the tokens of the reserve that are there, and its svg.gauge the fill
  // level (see chart.Gauge).
  function setGauge(svg, tokens, capacity) {
    var fill = svg.querySelector(".gauge-fill");
    if (!fill) { return; }
    var t = Math.max(0, Math.min(tokens, capacity));
    var whole = Math.floor(t);
    fill.setAttribute("width", capacity > 0 ? String(Math.round(t / capacity * 10000) / 100) : "0");
    fill.setAttribute("fill", t < 1 ? fill.getAttribute("data-low-fill") : fill.getAttribute("data-fill"));
    var label = groupDigits(whole) + " of " + groupDigits(capacity) + " " + (svg.getAttribute("data-unit") || "tokens") + " available";
    svg.setAttribute("aria-valuenow", String(whole));
    svg.setAttribute("aria-valuemax", String(capacity));
    svg.setAttribute("aria-label", label);
    var title = svg.querySelector("title");
    if (title) { title.textContent = label; }
  }

  // setTime shows an RFC 3339 time in the <time> element inside el (or
  // el's text when there is none), as localizeTimes does.
  function setTime(el, iso, none) {
    var t = el.querySelector("time");
    if (!iso) {
      if (none) { el.textContent = none; }
      return;
    }
    var d = new Date(iso);
    if (isNaN(d.getTime())) { return; }
    if (!t) {
      t = document.createElement("time");
      el.textContent = "";
      el.appendChild(t);
    }
    t.setAttribute("datetime", iso);
    t.textContent = localTime(d);
    t.title = utcTime(d);
    t.setAttribute("data-localized", "");
  }

  function applyState(el, st) {
    if (st && st.now) {
      el.querySelectorAll("[data-live-now]").forEach(function (t) { setTime(t, st.now); });
    }
    if (!st || st.exists === false || typeof st.tokens !== "number" || typeof st.capacity !== "number") {
      el.setAttribute("data-live-missing", "");
      return;
    }
    el.querySelectorAll("[data-live-refilled]").forEach(function (t) { setTime(t, st.refilled, "never taken from"); });
    el.removeAttribute("data-live-missing");
    var whole = Math.floor(Math.max(0, Math.min(st.tokens, st.capacity)));
    el.querySelectorAll("[data-live-tokens]").forEach(function (t) { t.textContent = groupDigits(whole); });
    el.querySelectorAll("[data-live-capacity]").forEach(function (t) { t.textContent = groupDigits(st.capacity); });
    if (typeof st.in_use === "number") {
      el.querySelectorAll("[data-live-in-use]").forEach(function (t) { t.textContent = groupDigits(st.in_use); });
      el.querySelectorAll("[data-live-next-expiry]").forEach(function (t) { setTime(t, st.next_expiry, "no slot held"); });
    }
    // A quota: its count this period and when the period ends.
    if (typeof st.used === "number") {
      el.querySelectorAll("[data-live-used]").forEach(function (t) { t.textContent = groupDigits(st.used); });
      el.querySelectorAll("[data-live-reset]").forEach(function (t) { setTime(t, st.reset, t.getAttribute("data-none")); });
    }
    // The reserve left: the reserve's tokens that are there (buckets.Config.ReserveLeft).
    var reserve = typeof st.reserve === "number" ? st.reserve : 0;
    el.querySelectorAll("[data-live-reserve-left]").forEach(function (t) {
      t.textContent = groupDigits(Math.max(0, Math.min(reserve, whole)));
    });
    el.querySelectorAll("svg.gauge").forEach(function (g) { setGauge(g, st.tokens, st.capacity); });
    el.setAttribute("data-live-tokens-now", String(whole));
  }

  document.querySelectorAll("[data-live-src]").forEach(function (root) {
    var src = root.getAttribute("data-live-src");
    var base = parseInt(root.getAttribute("data-live-interval"), 10) || 2000;
    var delay = base, timer = null, stopped = false;
    function schedule() {
      if (!stopped) { timer = setTimeout(poll, document.hidden ? Math.max(delay, 30000) : delay); }
    }
    function poll() {
      timer = null;
      fetch(src, { credentials: "same-origin", headers: { "Accept": "application/json" }, cache: "no-store" })
        .then(function (resp) {
          if (resp.status === 401 || resp.status === 403 || resp.status === 404) { stopped = true; }
          if (!resp.ok) { throw new Error("HTTP " + resp.status); }
          return resp.json();
        })
        .then(function (data) {
          if (data && Array.isArray(data.buckets)) {
            data.buckets.forEach(function (st) {
              root.querySelectorAll("[data-bucket]").forEach(function (el) {
                if (el.getAttribute("data-bucket") === st.name) { applyState(el, st); }
              });
            });
          } else {
            applyState(root, data);
            // Figures of the same bucket elsewhere on the page.
            document.querySelectorAll("[data-live-also]").forEach(function (el) {
              if (el.getAttribute("data-live-also") === src) { applyState(el, data); }
            });
          }
          root.removeAttribute("data-live-stale");
          root.setAttribute("data-live-updated", new Date().toISOString());
          delay = base;
        })
        .catch(function () {
          // Keep the last values, mark them stale, and back off.
          root.setAttribute("data-live-stale", "");
          delay = Math.min(delay * 2, 60000);
        })
        .then(schedule);
    }
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && timer !== null && !stopped) {
        clearTimeout(timer);
        poll();
      }
    });
    schedule();
  });

  // ---------------------------------------------------------------------
  // Sections marked data-refresh="N" (the usage charts) are drawn again
  // from the server every N seconds while the page is visible: the page's
  // own URL is fetched, parsed as a document (no script in it runs), and
  // the section's children replaced by the new ones. Hidden tabs do not
  // poll; a tab shown again refreshes at once if a refresh is due.
  document.querySelectorAll("section[data-refresh][id]").forEach(function (sec) {
    var last = Date.now(), timer = null, busy = false;
    function refresh() {
      if (busy) { return; }
      busy = true;
      fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" }, cache: "no-store" })
        .then(function (resp) {
          if (!resp.ok) { throw new Error("HTTP " + resp.status); }
          return resp.text();
        })
        .then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.getElementById(sec.id);
          if (!fresh) { return; }
          var nodes = Array.prototype.map.call(fresh.childNodes, function (n) { return document.importNode(n, true); });
          sec.replaceChildren.apply(sec, nodes);
          localizeTimes(sec);
          localizeChartTimes(sec);
          sec.removeAttribute("data-refresh-stale");
          sec.setAttribute("data-refreshed", new Date().toISOString());
        })
        .catch(function () { sec.setAttribute("data-refresh-stale", ""); })
        .then(function () { busy = false; last = Date.now(); schedule(); });
    }
    function schedule() {
      var every = (parseInt(sec.getAttribute("data-refresh"), 10) || 60) * 1000;
      clearTimeout(timer);
      timer = null;
      if (!document.hidden) { timer = setTimeout(refresh, Math.max(0, last + every - Date.now())); }
    }
    document.addEventListener("visibilitychange", schedule);
    schedule();
  });
})();
