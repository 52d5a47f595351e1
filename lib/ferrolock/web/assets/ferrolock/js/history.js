// The History page's charts (lib/ferrolock/web/views/history.erb), drawn with the Chart.js that
// Sidekiq 8 serves. The data is in #ferrolock-history's data-charts (no inline script under
// Sidekiq's CSP). Each canvas gets data-points (the sum of its series) and data-painted (pixels
// drawn) once drawn, which the browser test reads; the page reloads every minute, like a poll.
(function () {
  "use strict";
  var COLORS = ["#537bc4", "#acc236", "#f67019", "#f53794", "#166a8f", "#00a950", "#8549ba", "#4dc9f6"];

  function label(at, step) {
    var date = new Date(at * 1000);
    var hhmm = date.toISOString().substr(11, 5);
    return step >= 3600 ? date.toISOString().substr(5, 5) + " " + hhmm : hhmm;
  }

  function painted(canvas) {
    var data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    var count = 0;
    for (var i = 3; i < data.length; i += 4) { if (data[i] !== 0) count++; }
    return count;
  }

  function draw(root, chart, index) {
    var box = document.createElement("div");
    box.className = "ferrolock-chart-box";
    var canvas = document.createElement("canvas");
    canvas.className = "ferrolock-chart";
    box.appendChild(canvas);
    root.appendChild(box);
    var step = Number(root.getAttribute("data-step"));
    var names = Object.keys(chart.series);
    var points = 0;
    var datasets = names.map(function (name, i) {
      chart.series[name].forEach(function (n) { points += n; });
      return { label: name, data: chart.series[name], borderColor: COLORS[i % COLORS.length],
               backgroundColor: COLORS[i % COLORS.length], pointRadius: 0, borderWidth: 2, tension: 0.2 };
    });
    new window.Chart(canvas, {
      type: "line",
      data: { labels: chart.labels.map(function (at) { return label(at, step); }), datasets: datasets },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 plugins: { title: { display: true, text: chart.title } },
                 scales: { y: { beginAtZero: true } } }
    });
    canvas.setAttribute("data-points", String(points));
    canvas.setAttribute("data-painted", String(painted(canvas)));
    canvas.setAttribute("data-index", String(index));
  }

  function start() {
    var root = document.getElementById("ferrolock-history");
    if (!root || !window.Chart) return;
    JSON.parse(root.getAttribute("data-charts")).forEach(function (chart, i) { draw(root, chart, i); });
    window.setTimeout(function () { window.location.reload(); }, 60000);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
