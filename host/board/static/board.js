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

  // A session's live view follows its newest event while the reader is at its bottom; once
  // they scroll up it stays where they are, and a button counts what arrived below ("3 new ↓")
  // and takes them there.
  var SLACK = 40; // px from the bottom that still count as "at the bottom"

  function follow() {
    var box = document.getElementById("stream");
    var badge = document.getElementById("new-below");
    if (!box || !badge) return;
    var pinned = true, unseen = 0;
    function atBottom() { return box.scrollHeight - box.scrollTop - box.clientHeight <= SLACK; }
    function seen() { unseen = 0; badge.hidden = true; }
    function toBottom() { box.scrollTop = box.scrollHeight; pinned = true; seen(); }
    box.addEventListener("scroll", function () {
      pinned = atBottom();
      if (pinned) seen();
    });
    new MutationObserver(function (changes) {
      var added = 0;
      changes.forEach(function (c) {
        c.addedNodes.forEach(function (n) { if (n.nodeType === 1) added++; });
      });
      if (!added) return;
      if (pinned) { box.scrollTop = box.scrollHeight; return; }
      unseen += added;
      badge.textContent = unseen + " new ↓";
      badge.hidden = false;
    }).observe(box, { childList: true });
    badge.addEventListener("click", toBottom);
  }

  // Tables marked sortable: a click on a column's heading sorts by it (again: the other way).
  // A cell's data-sort, when it has one, is what it sorts by (a time, a rate), else its text.
  function sortable(table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.classList.add("sort");
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var down = th.getAttribute("aria-sort") !== "descending";
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", down ? "descending" : "ascending");
        function key(row) {
          var cell = row.cells[col];
          var v = !cell ? "" : cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
          var n = Number(v);
          return v !== "" && !isNaN(n) ? n : v;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
          return down ? -c : c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    refresh();
    follow();
    document.querySelectorAll("table.sortable").forEach(sortable);
  });
})();
