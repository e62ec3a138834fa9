// A benchmark's history charts, drawn with the vendored uPlot from the summaries embedded in the
// page (#history-data). One series per GPU count and precision; vertical lines mark nights with an
// alert, a regression fixed, a flag, a cleared flag, a baseline restart, an acknowledged shift, reruns or a manual run.
// The page carries its newest nights; older ones (doc.more) arrive in pages, newest first, each
// page's span twice the last, and the charts are drawn again as each one lands.
(function () {
  "use strict";
  const doc = JSON.parse(document.getElementById("history-data").textContent);
  const colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];
  const markColors = { alert: "#c4320a", restart: "#175cd3", change: "#0e9384", move: "#dd2590", flagged: "#b54708", cleared: "#067647", fixed: "#079455",
                       shift: "#6941c6", rerun: "#98a2b3", manual: "#d0d5dd" };

  function draw() {
    for (const u of Object.values(window.scalebenchCharts || {})) u.destroy();
    window.scalebenchCharts = {};
    // rows of `fields` (compact: a year of nights is a few hundred kB); the run and image are per night
    const points = doc.rows.map((r) => Object.fromEntries(doc.fields.map((f, i) => [f, r[i]])));
    for (const p of points) Object.assign(p, doc.runs[p.night]);
    const nights = Object.keys(doc.runs).sort();
    const xs = nights.map((n) => Date.parse(n + "T00:00:00Z") / 1000);
    const at = Object.fromEntries(nights.map((n, i) => [n, i]));
    const keyOf = (p) => p.gpus + " GPU" + (p.gpus === 1 ? "" : "s") + " " + p.precision;
    const keys = [...new Set(points.map(keyOf))].sort((a, b) => parseInt(a) - parseInt(b) || a.localeCompare(b));
    const byNight = nights.map(() => []);  // night index -> its points
    const at_key = {};                     // key -> night index -> point
    for (const p of points) {
      byNight[at[p.night]].push(p);
      (at_key[keyOf(p)] = at_key[keyOf(p)] || {})[at[p.night]] = p;
    }
    // per night: what happened (marks from the night's report, shifts, reruns, manual runs, retries)
    const marks = nights.map(() => []);
    for (const p of points) {
      const i = at[p.night];
      for (const m of p.marks || []) marks[i].push({ kind: m.kind, text: m.text });
      if (p.reruns) marks[i].push({ kind: "rerun", text: keyOf(p) + ": " + p.reruns + " same-night reruns" });
      if (p.retried) marks[i].push({ kind: "retried", text: keyOf(p) + ": " + p.retried + " cells took more than one attempt" });
      if (p.run_type !== "scheduled") marks[i].push({ kind: "manual", text: "a " + p.run_type + " run (no scheduled run that night)" });
    }
    for (const s of doc.shifts) {
      const i = nights.findIndex((n) => n >= s.since);
      if (i >= 0) marks[i].push({ kind: "shift", text: "acknowledged shift since " + s.since + ": " + s.reason });
    }

    function seriesData(value, only) {
      const chosen = keys.filter((k) => !only || only(k));
      const ys = chosen.map(() => nights.map(() => null));
      for (const p of points) {
        const j = chosen.indexOf(keyOf(p));
        if (j >= 0) ys[j][at[p.night]] = value(p);
      }
      return { labels: chosen, keys: chosen, data: [xs, ...ys] };
    }

    function tipText(i, labels) {
      const mine = byNight[i].filter((p) => !labels || labels.includes(keyOf(p)));
      const runs = [...new Set(mine.map((p) => p.run_id + " (" + p.run_type + ")"))].join(", ");
      const images = [...new Set(mine.map((p) => p.image_digest || "no image digest"))].join(", ");
      const cells = mine.map((p) => keyOf(p) + ": " + p.valid + "/" + p.cells + " valid").join("; ");
      const bases = [...new Set(mine.map((p) => p.basis || "unknown"))].join(", ");
      const lines = ["night " + nights[i] + " · run " + runs, "image " + images, "timed by " + bases, "cells " + cells];
      for (const [key, byIdx] of Object.entries(predicted)) {
        if (byIdx[i] && (!labels || labels.includes(key))) lines.push("frozen prediction: " + byIdx[i].line);
      }
      const mine_marks = marks[i].filter((m) => !labels || !/ GPUs? /.test(m.text) || labels.some((l) => m.text.includes(l)));
      for (const m of mine_marks.slice(0, 4)) lines.push(m.kind + ": " + m.text);
      if (mine_marks.length > 4) lines.push("… and " + (mine_marks.length - 4) + " more (Marked nights, below)");
      return lines.join("\n");
    }

    function markerHook(u) {
      const ctx = u.ctx;
      ctx.save();
      for (let i = 0; i < nights.length; i++) {
        const kinds = marks[i].map((m) => m.kind);
        const kind = ["alert", "fixed", "restart", "change", "move", "shift", "flagged", "cleared", "rerun", "manual"].find((k) => kinds.includes(k));
        if (!kind) continue;
        const x = Math.round(u.valToPos(xs[i], "x", true));
        if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
        ctx.strokeStyle = markColors[kind];
        ctx.lineWidth = kind === "alert" || kind === "restart" || kind === "fixed" ? 2 : 1;
        ctx.setLineDash(kind === "restart" || kind === "shift" || kind === "change" || kind === "move" ? [6, 4] : []);
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
      }
      ctx.restore();
    }

    // frozen predictions (the report froze each before its night's cells): per "predicted <key>", night -> images/s
    const predicted = {};
    for (const [night, gpus, precision, ips, line] of doc.predicted || []) {
      const key = "predicted " + keyOf({ gpus: gpus, precision: precision });
      if (at[night] !== undefined) ((predicted[key] = predicted[key] || {})[at[night]] = { ips: ips, line: line });
    }
    function withPredicted(sd) {
      for (const key of Object.keys(predicted).sort((a, b) => parseInt(a.split(" ")[1]) - parseInt(b.split(" ")[1]))) {
        sd.labels.push(key);
        sd.data.push(nights.map((n, i) => (predicted[key][i] ? predicted[key][i].ips : null)));
      }
      return sd;
    }

    function chart(id, yLabel, sd) {
      const el = document.getElementById("chart-" + id);
      const tip = document.getElementById("tip-" + id);
      el.textContent = "";  // drawn again as older nights land
      if (!sd.labels.length || sd.data.slice(1).every((ys) => ys.every((v) => v === null))) {
        el.textContent = "Nothing to show: no night has this figure yet.";
        return;
      }
      const opts = {
        width: Math.min(1100, document.body.clientWidth - 40), height: 280,
        scales: { x: { time: true } },
        // room right of the plot for half of the last date label, which is centred on its tick
        padding: [12, 48, 0, 0],
        // whole nights on the x axis: ticks a day apart or more, written as dates
        axes: [{ space: 70, incrs: [1, 2, 7, 14, 30, 91, 182, 365].map((d) => d * 86400),
                 values: (u, ticks) => ticks.map((t) => new Date(t * 1000).toISOString().slice(0, 10)) },
               { label: yLabel }],
        series: [{ label: "night", value: (u, v) => (v == null ? "–" : new Date(v * 1000).toISOString().slice(0, 10)) },
                 ...sd.labels.map((l, j) => {
                   const guess = l.startsWith("predicted ");  // a frozen prediction: hollow points, no line
                   const own = keys.includes(l.replace("predicted ", "")) ? keys.indexOf(l.replace("predicted ", "")) : j;
                   return { label: l, stroke: colors[own % colors.length], width: guess ? 0 : 2, spanGaps: false,
                            dash: guess ? [4, 4] : undefined, points: { show: true, size: guess ? 9 : 6, fill: guess ? "#fff" : undefined } };
                 })],
        cursor: { drag: { x: true, y: false } },
        hooks: {
          draw: [markerHook],
          setCursor: [(u) => { if (u.cursor.idx != null) tip.textContent = tipText(u.cursor.idx, sd.keys); }],
        },
      };
      // kept on window so a browser test (or a person in the console) can read a chart's state
      (window.scalebenchCharts = window.scalebenchCharts || {})[id] = new uPlot(opts, sd.data, el);
    }

    // one chart per charted figure (core.figures, handed over by the page), from the GPU count it means something at;
    // a figure the tables write as a percentage is drawn in percent
    for (const f of doc.figures) {
      const value = (p) => (p[f.name] == null ? null : f.percent ? 100 * p[f.name] : p[f.name]);
      const sd = seriesData(value, (k) => parseInt(k) >= f.from_gpus);
      chart(f.name, f.unit + (f.percent ? " (%)" : ""), f.name === "images_per_s" ? withPredicted(sd) : sd);
    }
    const top = points.reduce((m, p) => Math.max(m, p.gpus), 0);
    const metrics = [...new Set(points.flatMap((p) => Object.keys(p.metrics || {})))].sort();
    const acc = { labels: [], data: [xs] };
    for (const m of metrics) {
      for (const k of keys.filter((k) => parseInt(k) === top)) {
        acc.labels.push(m + " · " + k);
        acc.data.push(nights.map((n, i) => {
          const p = (at_key[k] || {})[i];
          return p && p.metrics && p.metrics[m] != null ? p.metrics[m] : null;
        }));
      }
    }
    chart("accuracy", "metric", acc);
    const parts = ["compute", "data_wait", "sync", "other"];
    const first = keys.find((k) => parseInt(k) === top);
    const steps = { labels: parts, data: [xs, ...parts.map((part) => nights.map((n, i) => {
      const p = (at_key[first] || {})[i];
      return p && p.step_shares && p.step_shares[part] != null ? 100 * p.step_shares[part] : null;
    }))] };
    chart("steps", "% of step (" + first + ")", steps);
  }

  // an older page: {next, predicted, rows, runs}, its nights before every night shown
  async function older(url) {
    const status = document.getElementById("history-status");
    while (url) {
      if (status) status.textContent = "Loading older nights…";
      const answer = await fetch(url, { credentials: "same-origin" });
      if (!answer.ok) {
        if (status) status.textContent = "Older nights could not be loaded (" + answer.status + "); the charts show the nights above.";
        return;
      }
      const page = await answer.json();
      doc.rows = page.rows.concat(doc.rows);
      doc.predicted = page.predicted.concat(doc.predicted || []);
      Object.assign(doc.runs, page.runs);
      draw();
      url = page.next;
    }
    if (status) status.textContent = "Every night of the window is drawn (" + Object.keys(doc.runs).length + " nights).";
    window.scalebenchLoaded = true;
  }

  draw();
  if (doc.more) older(doc.more); else window.scalebenchLoaded = true;
})();
