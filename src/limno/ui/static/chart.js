// limno web UI: a line, bar or scatter chart of two columns of a query's answer,
// drawn as SVG by hand (no library). The choice lives in the form and the URL.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const W = 760, H = 380, M = { top: 16, right: 20, bottom: 48, left: 64 };

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.append(node);
  return node;
}

function asNumber(v) {
  if (typeof v === "number") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "string" && v.trim() !== "" && !isNaN(Number(v))) return Number(v);
  if (typeof v === "string" && /^\d{4}-\d\d-\d\d/.test(v)) {
    const t = Date.parse(v);
    return isNaN(t) ? null : t;
  }
  return null;
}

function ticks(lo, hi, n) {
  if (lo === hi) return [lo];
  const step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
  const err = (hi - lo) / n / step;
  const nice = step * (err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1);
  const out = [];
  for (let t = Math.ceil(lo / nice) * nice; t <= hi + nice * 1e-9; t += nice) out.push(t);
  return out;
}

function label(v) {
  if (Math.abs(v) >= 1e11) return new Date(v).toISOString().slice(0, 10);  // epoch ms
  return Number.isInteger(v) ? String(v) : v.toPrecision(4);
}

function draw(figure, data, kind, xName, yName) {
  const xi = data.columns.indexOf(xName), yi = data.columns.indexOf(yName);
  for (const old of figure.querySelectorAll("svg")) old.remove();
  const svg = el("svg", {
    viewBox: `0 0 ${W} ${H}`, role: "img", width: W, height: H,
    "aria-label": `${kind} chart of ${yName} by ${xName}`, "data-kind": kind,
  });
  figure.prepend(svg);
  const numericX = data.rows.every((r) => asNumber(r[xi]) !== null);
  let points = data.rows
    .map((r, i) => ({ x: numericX ? asNumber(r[xi]) : i, xl: r[xi], y: asNumber(r[yi]) }))
    .filter((p) => p.y !== null && p.x !== null);
  if (kind === "line" && numericX) points.sort((a, b) => a.x - b.x);
  if (!points.length) {
    el("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, svg).textContent =
      `no numeric values in ${yName}`;
    return;
  }
  const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  let y0 = Math.min(0, ...ys), y1 = Math.max(...ys);
  if (kind === "bar") { x0 -= 0.5; x1 += 0.5; }
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { y1 = y0 + 1; }
  const sx = (v) => M.left + ((v - x0) / (x1 - x0)) * (W - M.left - M.right);
  const sy = (v) => H - M.bottom - ((v - y0) / (y1 - y0)) * (H - M.top - M.bottom);
  const axes = el("g", { class: "axes", stroke: "#4a5563", "font-size": "12" }, svg);
  el("line", { x1: M.left, y1: H - M.bottom, x2: W - M.right, y2: H - M.bottom }, axes);
  el("line", { x1: M.left, y1: M.top, x2: M.left, y2: H - M.bottom }, axes);
  for (const t of ticks(y0, y1, 5)) {
    el("line", { x1: M.left - 4, y1: sy(t), x2: W - M.right, y2: sy(t), "stroke-opacity": "0.15" }, axes);
    const text = el("text", { x: M.left - 8, y: sy(t) + 4, "text-anchor": "end", stroke: "none", fill: "#1b1f24" }, axes);
    text.textContent = label(t);
  }
  const xt = numericX ? ticks(x0, x1, 6) : points.filter((_, i) => i % Math.ceil(points.length / 8) === 0).map((p) => p.x);
  for (const t of xt) {
    const text = el("text", { x: sx(t), y: H - M.bottom + 18, "text-anchor": "middle", stroke: "none", fill: "#1b1f24" }, axes);
    text.textContent = numericX ? label(t) : String(points.find((p) => p.x === t).xl);
  }
  const xl = el("text", { x: (W + M.left) / 2, y: H - 8, "text-anchor": "middle", fill: "#1b1f24" }, svg);
  xl.textContent = xName;
  const yl = el("text", { x: 14, y: H / 2, "text-anchor": "middle", fill: "#1b1f24", transform: `rotate(-90 14 ${H / 2})` }, svg);
  yl.textContent = yName;
  const marks = el("g", { class: "marks", fill: "#0b5cd5", stroke: "#0b5cd5" }, svg);
  if (kind === "line") {
    el("polyline", { fill: "none", "stroke-width": "2", points: points.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" ") }, marks);
  } else if (kind === "bar") {
    const width = Math.max(1, ((W - M.left - M.right) / (x1 - x0)) * 0.8);
    for (const p of points) {
      const top = Math.min(sy(p.y), sy(0));
      el("rect", { x: sx(p.x) - width / 2, y: top, width, height: Math.abs(sy(0) - sy(p.y)) }, marks);
    }
  } else {
    for (const p of points) el("circle", { cx: sx(p.x), cy: sy(p.y), r: 3.5, "fill-opacity": "0.7" }, marks);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const figure = document.querySelector("[data-chart]");
  const form = document.querySelector("[data-chart-form]");
  const source = document.getElementById("chart-data");
  if (!figure || !form || !source) return;
  const data = JSON.parse(source.textContent);
  const redraw = () => {
    draw(figure, data, form.elements.chart.value, form.elements.x.value, form.elements.y.value);
    const url = new URL(window.location.href);
    for (const name of ["chart", "x", "y"]) url.searchParams.set(name, form.elements[name].value);
    history.replaceState(null, "", url);
  };
  form.addEventListener("change", redraw);
  form.addEventListener("submit", (event) => { event.preventDefault(); redraw(); });
  redraw();
});
