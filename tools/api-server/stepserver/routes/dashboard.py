"""GET /: the dashboard. One static page with its own small script (no CDN, nothing fetched from
elsewhere): daily totals from GET /steps/daily as an SVG bar chart over a chosen range (default the
last 90 days in the browser's zone), merged totals with the raw sums or each source's on demand, the
exact numbers on hover and in a table below. The URL may set tz, from, to and view (merged|raw|sources).
With tokens, the page asks for one and keeps it in the tab's sessionStorage only."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..app import Context

PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>StepSync: daily steps</title>
<style>
  :root { --merged: #2f7ed8; --raw: #c9d7e8; --ink: #1d2733; --muted: #6b7785; font-family: system-ui, sans-serif; color: var(--ink); }
  body { margin: 0 auto; padding: 12px; max-width: 1100px; }
  h1 { font-size: 1.3rem; margin: 4px 0 8px; }
  form { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: end; margin-bottom: 10px; }
  label { display: flex; flex-direction: column; font-size: .8rem; color: var(--muted); }
  input, select, button { font: inherit; padding: 4px 6px; }
  #summary { margin: 6px 0; font-size: .95rem; }
  #status { color: #b00020; min-height: 1.2em; }
  svg { width: 100%; height: auto; display: block; touch-action: pan-y; }
  .axis { font-size: 11px; fill: var(--muted); }
  #tip { position: fixed; pointer-events: none; background: #fff; border: 1px solid #ccd; border-radius: 4px;
         padding: 4px 8px; font-size: .85rem; box-shadow: 0 1px 4px #0002; display: none; }
  table { border-collapse: collapse; font-size: .85rem; margin-top: 14px; width: 100%; }
  th, td { text-align: right; padding: 2px 8px; border-bottom: 1px solid #eef; }
  th:first-child, td:first-child { text-align: left; }
  details { margin-top: 10px; }
  [hidden] { display: none !important; }
  .legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }
</style>
</head>
<body>
<h1>Daily steps</h1>
<form id="controls">
  <label>From <input type="date" id="from" required></label>
  <label>To <input type="date" id="to" required></label>
  <label>Time zone <input id="tz" size="18"></label>
  <label>Show <select id="view">
    <option value="merged">merged (as Health shows)</option>
    <option value="raw">merged and raw sum</option>
    <option value="sources">per source</option>
  </select></label>
  <label id="tokenLabel" hidden>Token <input id="token" type="password" size="24" autocomplete="off"></label>
  <button type="submit">Show</button>
</form>
<div id="status" role="status"></div>
<div id="summary"></div>
<div class="legend" id="legend"></div>
<svg id="chart" viewBox="0 0 1000 320" role="img" aria-label="daily steps"></svg>
<div id="tip"></div>
<details open><summary>Numbers</summary><table id="table"><thead></thead><tbody></tbody></table></details>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const palette = ["#2f7ed8", "#f28f43", "#5cb85c", "#8e6bbf", "#d9534f", "#20a0a0", "#a0a020"];
const iso = (d) => d.toISOString().slice(0, 10);
function localToday(zone) {
  try { return new Intl.DateTimeFormat("en-CA", {timeZone: zone}).format(new Date()); } catch (e) { return iso(new Date()); }
}
const zone = params.get("tz") || Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
const today = localToday(zone);
$("tz").value = zone;
$("to").value = params.get("to") || today;
$("from").value = params.get("from") || iso(new Date(Date.parse(today + "T00:00:00Z") - 89 * 86400000));
$("view").value = params.get("view") || "merged";
$("token").value = sessionStorage.getItem("stepsyncToken") || "";
const fmt = (n) => n.toLocaleString("en-US");

async function load() {
  $("status").textContent = "";
  const query = new URLSearchParams({tz: $("tz").value, from: $("from").value, to: $("to").value, bySource: "true"});
  const headers = {};
  if ($("token").value) { headers["Authorization"] = "Bearer " + $("token").value; sessionStorage.setItem("stepsyncToken", $("token").value); }
  let response;
  try { response = await fetch("/steps/daily?" + query, {headers}); }
  catch (e) { $("status").textContent = "cannot reach the server"; return; }
  const body = await response.json().catch(() => ({error: "HTTP " + response.status}));
  if (response.status === 401) { $("tokenLabel").hidden = false; $("status").textContent = body.error + " (enter a token)"; return; }
  if (!response.ok) { $("status").textContent = body.error || ("HTTP " + response.status); return; }
  draw(body);
}

function draw(doc) {
  const view = $("view").value;
  const days = doc.days;
  const sources = [];
  for (const day of days) for (const s of day.sources || []) {
    const key = s.bundleId + "\u0000" + (s.deviceName ?? "");
    if (!sources.some((x) => x.key === key)) sources.push({key, label: s.bundleId + (s.deviceName ? " (" + s.deviceName + ")" : "")});
  }
  const total = days.reduce((a, d) => a + d.merged, 0), rawTotal = days.reduce((a, d) => a + d.raw, 0);
  $("summary").textContent = `${fmt(total)} steps merged over ${days.length} days (${fmt(rawTotal)} raw), ` +
    `${fmt(Math.round(total / Math.max(days.length, 1)))} a day, time zone ${doc.timeZone}`;
  const svg = $("chart"), W = 1000, H = 320, left = 52, bottom = 24, top = 8;
  const max = Math.max(1, ...days.map((d) => view === "merged" ? d.merged : d.raw));
  const step = Math.pow(10, Math.floor(Math.log10(max))), nice = Math.ceil(max / step) * step;
  const bw = (W - left - 4) / Math.max(days.length, 1), y = (v) => H - bottom - (H - bottom - top) * v / nice;
  let out = "";
  for (let k = 0; k <= 4; k++) {
    const v = nice * k / 4;
    out += `<line x1="${left}" x2="${W}" y1="${y(v)}" y2="${y(v)}" stroke="#eef"/>` +
           `<text class="axis" x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${fmt(v)}</text>`;
  }
  days.forEach((d, i) => {
    const x = left + i * bw, w = Math.max(1, bw * 0.8);
    const data = `data-date="${d.date}" data-merged="${d.merged}" data-raw="${d.raw}"`;
    if (view === "raw") out += `<rect class="raw" x="${x}" y="${y(d.raw)}" width="${w}" height="${y(0) - y(d.raw)}" fill="var(--raw)"/>`;
    if (view === "sources") {
      let base = 0;
      for (const s of d.sources || []) {
        const k = sources.findIndex((x) => x.key === s.bundleId + "\u0000" + (s.deviceName ?? ""));
        out += `<rect class="source" x="${x}" y="${y(base + s.merged)}" width="${w}" height="${y(base) - y(base + s.merged)}" fill="${palette[k % palette.length]}"/>`;
        base += s.merged;
      }
      out += `<rect class="day" ${data} x="${x}" y="${y(d.merged)}" width="${w}" height="${y(0) - y(d.merged)}" fill="transparent"/>`;
    } else {
      out += `<rect class="day" ${data} x="${x}" y="${y(d.merged)}" width="${w}" height="${y(0) - y(d.merged)}" fill="var(--merged)"/>`;
    }
    if (days.length <= 31 || i % Math.ceil(days.length / 12) === 0)
      out += `<text class="axis" x="${x + w / 2}" y="${H - 8}" text-anchor="middle">${d.date.slice(5)}</text>`;
  });
  svg.innerHTML = out;
  $("legend").innerHTML = view === "sources"
    ? sources.map((s, k) => `<span style="background:${palette[k % palette.length]}"></span>${escapeHtml(s.label)}`).join("")
    : `<span style="background:var(--merged)"></span>merged` + (view === "raw" ? `<span style="background:var(--raw)"></span>raw sum` : "");
  const head = ["Date", "Merged", "Raw"].concat(view === "sources" ? sources.map((s) => s.label) : []);
  $("table").tHead.innerHTML = "<tr>" + head.map((h) => `<th>${escapeHtml(h)}</th>`).join("") + "</tr>";
  $("table").tBodies[0].innerHTML = days.map((d) => `<tr data-date="${d.date}"><td>${d.date}</td><td class="merged">${d.merged}</td><td class="raw">${d.raw}</td>` +
    (view === "sources" ? sources.map((s) => { const x = (d.sources || []).find((v) => v.bundleId + "\u0000" + (v.deviceName ?? "") === s.key); return `<td>${x ? x.merged : 0}</td>`; }).join("") : "") + "</tr>").join("");
}

function escapeHtml(text) { return String(text).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c])); }

function showTip(event) {
  const rect = event.target.closest("rect.day");
  if (!rect) { $("tip").style.display = "none"; return; }
  const tip = $("tip");
  tip.textContent = `${rect.dataset.date}: ${fmt(+rect.dataset.merged)} steps (raw ${fmt(+rect.dataset.raw)})`;
  tip.style.display = "block";
  tip.style.left = Math.min(event.clientX + 12, innerWidth - 220) + "px";
  tip.style.top = (event.clientY + 12) + "px";
}
$("chart").addEventListener("mousemove", showTip);
$("chart").addEventListener("touchstart", (e) => showTip(Object.assign({}, e, {target: e.target, clientX: e.touches[0].clientX, clientY: e.touches[0].clientY})), {passive: true});
$("chart").addEventListener("mouseleave", () => { $("tip").style.display = "none"; });
$("controls").addEventListener("submit", (e) => { e.preventDefault(); load(); });
$("view").addEventListener("change", load);
load();
</script>
</body>
</html>
"""


def routes(context: Context) -> list:
    page = PAGE.encode()

    async def dashboard(request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8",
                        headers={"Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; "
                                 "style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'",
                                 "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"})

    return [("/", dashboard, ["GET"])]
