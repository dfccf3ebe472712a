// Injected first in <head> by tests/test_html_report.py: records every error the page raises,
// then measures what rendered and writes it into the DOM, which chromium --dump-dom prints.
(function () {
  var errors = [];
  var origError = console.error;
  console.error = function () {
    errors.push("console.error: " + Array.prototype.join.call(arguments, " "));
    return origError.apply(console, arguments);
  };
  window.addEventListener("error", function (e) {
    var t = e.target;
    errors.push(t && t !== window ? "load failed: " + (t.src || t.href || t.tagName) : "error: " + e.message);
  }, true);
  window.addEventListener("unhandledrejection", function (e) { errors.push("rejection: " + e.reason); });
  document.addEventListener("securitypolicyviolation", function (e) { errors.push("csp: " + e.blockedURI + " " + e.violatedDirective); });
  function size(el) { var r = el.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; }
  window.addEventListener("load", function () {
    var counter = document.getElementById("row-count");
    var rowsShownAtLoad = counter ? counter.textContent : null;
    var charts = {};
    document.querySelectorAll("figure.chart").forEach(function (fig) {
      charts[fig.id] = Array.prototype.map.call(fig.querySelectorAll("rect.bar"), function (bar) {
        return {label: bar.dataset.label || bar.dataset.score, size: size(bar)};
      });
    });
    var bucket = document.getElementById("red-flags");
    var firstSection = document.querySelector("main > section");
    var summary = document.getElementById("summary");
    var rowCount = document.getElementById("row-count");
    var filter = document.getElementById("row-filter");
    // the text filter: a requirement ID every row's referenceBasis lists must not match rows
    var anyId = document.querySelector("details.row td code");
    var byId = null;
    if (filter && anyId) {
      filter.value = anyId.textContent;
      filter.dispatchEvent(new Event("input"));
      byId = rowCount.textContent;
      filter.value = "";
      filter.dispatchEvent(new Event("input"));
    }
    var flagLink = document.querySelector("a.flag-link");
    var byFlag = null;
    if (flagLink) {
      flagLink.click();
      byFlag = [flagLink.dataset.flag, rowCount.textContent];
    }
    var out = document.createElement("pre");
    out.id = "probe-result";
    out.textContent = JSON.stringify({
      errors: errors,
      charts: charts,
      bucketFirst: firstSection === bucket,
      bucketSize: bucket ? size(bucket) : null,
      bucketFlags: bucket ? Array.prototype.map.call(bucket.querySelectorAll(".flag"), function (f) { return f.dataset.flag; }) : [],
      rowsShown: rowsShownAtLoad,
      summaryTop: summary ? Math.round(summary.getBoundingClientRect().top + window.scrollY) : null,
      glossary: Array.prototype.map.call(document.querySelectorAll("#glossary dt"), function (d) { return d.textContent; }),
      filterById: byId,
      anyId: anyId ? anyId.textContent : null,
      filterByFlag: byFlag
    });
    document.body.appendChild(out);
  });
}());
