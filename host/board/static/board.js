// moss ui: the metric charts (uPlot). Everything else on the board is server-rendered HTML
// that htmx swaps in; no inline script runs (the page's Content-Security-Policy forbids it).
(function () {
  "use strict";
  var REFRESH_MS = 2000; // no polling faster than once a second
  var last = null;
  var STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 1e4, 2e4, 5e4, 1e5, 1e6, 1e7]; // whole steps

  function colour(i, n) { // a sweep's runs in parameter order: blue (lowest) to red (highest)
    var hue = n <= 1 ? 220 : 220 - Math.round(220 * i / (n - 1));
    return "hsl(" + hue + ", 70%, 45%)";
  }

  function draw(box, data) {
    var names = Object.keys(data.metrics || {});
    box.textContent = "";
    if (!names.length) {
      var p = document.createElement("p");
      p.className = "empty";
      p.textContent = "no metrics yet (a run's log lines with a step number and name=value pairs)";
      box.appendChild(p);
      return;
    }
    names.forEach(function (name) {
      var m = data.metrics[name];
      var div = document.createElement("div");
      div.className = "metric";
      div.setAttribute("data-metric", name);
      div.setAttribute("data-series", String(m.series.length));
      box.appendChild(div);
      var series = [{ label: "step" }];
      var rows = [m.steps];
      m.series.forEach(function (s, i) {
        series.push({ label: s.label, stroke: colour(s.rank, s.of), width: 2, spanGaps: true,
                      points: { show: true, size: 5 } });
        rows.push(s.values);
      });
      new uPlot({ title: name, width: Math.min(900, box.clientWidth || 900), height: 280,
                  scales: { x: { time: false } }, series: series,
                  axes: [{ incrs: STEPS, label: "step" }, {}] }, rows, div);
    });
  }

  function refresh() {
    var box = document.getElementById("charts");
    if (!box) return;
    fetch(box.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (text !== null && text !== last) { last = text; draw(box, JSON.parse(text)); }
      })
      .catch(function () {})
      .then(function () { setTimeout(refresh, REFRESH_MS); });
  }

  document.addEventListener("DOMContentLoaded", refresh);
})();
