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
    var charts = {};
    document.querySelectorAll("figure.chart").forEach(function (fig) {
      charts[fig.id] = Array.prototype.map.call(fig.querySelectorAll("rect.bar"), function (bar) {
        return {label: bar.dataset.label || bar.dataset.score, size: size(bar)};
      });
    });
    var bucket = document.getElementById("red-flags");
    var firstSection = document.querySelector("main > section");
    var out = document.createElement("pre");
    out.id = "probe-result";
    out.textContent = JSON.stringify({
      errors: errors,
      charts: charts,
      bucketFirst: firstSection === bucket,
      bucketSize: bucket ? size(bucket) : null,
      bucketFlags: bucket ? Array.prototype.map.call(bucket.querySelectorAll(".flag"), function (f) { return f.dataset.flag; }) : [],
      rowsShown: document.getElementById("row-count").textContent
    });
    document.body.appendChild(out);
  });
}());
