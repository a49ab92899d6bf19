// The overview: every tenant, namespace and topic (scalable and classic) with its traffic, and
// the broker's health. Names come from the admin REST API's lists; the numbers from the console's
// traffic stream (topics not loaded on this broker show "—").

import { bytes, consoleTopicUrl, count, esc, get, listen, parseTopicName, rate } from "./shared.js";
import { setCrumbs, setLive } from "./ui.js";

const RELIST_EVERY_MS = 15000;

export async function showOverview(main) {
  setCrumbs([["Overview", null]]);
  main.innerHTML = `
    <h1>Overview</h1>
    <div class="cards" id="cards"></div>
    <div class="toolbar" role="search">
      <label>Filter topics <input id="filter" type="search" placeholder="name contains…" autocomplete="off"></label>
      <label>Kind
        <select id="kind">
          <option value="all">all topics</option>
          <option value="topic">scalable</option>
          <option value="persistent">classic</option>
        </select>
      </label>
      <span class="muted" id="shown" aria-live="polite"></span>
    </div>
    <table id="topics">
      <caption class="sr-only">Topics by tenant and namespace</caption>
      <thead><tr>
        <th scope="col">Topic</th><th scope="col">Kind</th><th scope="col" class="num">Segments</th>
        <th scope="col" class="num">msg/s in</th><th scope="col" class="num">msg/s out</th>
        <th scope="col" class="num">Backlog</th><th scope="col" class="num">Storage</th>
        <th scope="col" class="num">Producers</th><th scope="col" class="num">Consumers</th>
      </tr></thead>
      <tbody></tbody>
    </table>`;
  const state = { namespaces: [], topics: [], layouts: {}, traffic: {} };
  const render = () => renderTable(main, state);
  main.querySelector("#filter").addEventListener("input", render);
  main.querySelector("#kind").addEventListener("change", render);
  await relist(state);
  render();
  setInterval(async () => {
    try {
      await relist(state);
      render();
    } catch {
      // the health badge says why; the table keeps the last list
    }
  }, RELIST_EVERY_MS);
  listen("/console/api/events", {
    traffic: (doc) => {
      state.traffic = doc.topics;
      render();
    },
  }, setLive);
}

async function relist(state) {
  const tenants = await get("/admin/v2/tenants");
  const namespaces = (await Promise.all(tenants.map((t) => get(`/admin/v2/namespaces/${encodeURIComponent(t)}`)))).flat();
  const topics = [];
  await Promise.all(namespaces.map(async (ns) => {
    const [tenant, name] = ns.split("/");
    const base = `${encodeURIComponent(tenant)}/${encodeURIComponent(name)}`;
    const [scalable, classic] = await Promise.all([
      get(`/admin/v2/scalable/${base}`).catch(() => []),
      get(`/admin/v2/persistent/${base}`).catch(() => []),
    ]);
    for (const topic of [...scalable, ...classic]) topics.push(topic);
  }));
  const layouts = {};
  await Promise.all(topics.filter((t) => t.startsWith("topic://")).map(async (t) => {
    try {
      const doc = await get(`/admin/v2/scalable/${t.slice("topic://".length).split("/").map(encodeURIComponent).join("/")}`);
      const segments = Object.values(doc.segments);
      layouts[t] = { active: segments.filter((s) => s.state === "ACTIVE").length, total: segments.length };
    } catch {
      // deleted meanwhile
    }
  }));
  state.namespaces = namespaces.sort();
  state.topics = topics.sort();
  state.layouts = layouts;
}

function renderTable(main, state) {
  const filter = main.querySelector("#filter").value.trim().toLowerCase();
  const kind = main.querySelector("#kind").value;
  const rows = [];
  let shown = 0;
  const totals = { in: 0, out: 0, backlog: 0, producers: 0, consumers: 0 };
  for (const ns of state.namespaces) {
    const topics = state.topics.filter((t) => {
      const ref = parseTopicName(t);
      return ref && `${ref.tenant}/${ref.namespace}` === ns && (kind === "all" || ref.domain === kind) && (!filter || t.toLowerCase().includes(filter));
    });
    if (filter && topics.length === 0) continue;
    rows.push(`<tr class="group"><td colspan="9">${esc(ns)} <span class="muted">(${topics.length} topic${topics.length === 1 ? "" : "s"})</span></td></tr>`);
    for (const name of topics) {
      shown += 1;
      const ref = parseTopicName(name);
      const t = state.traffic[name];
      if (t) {
        totals.in += t.msgRateIn;
        totals.out += t.msgRateOut;
        totals.backlog += t.backlog;
        totals.producers += t.producers;
        totals.consumers += t.consumers;
      }
      const scalable = ref.domain === "topic";
      const layout = state.layouts[name];
      const link = scalable ? `<a href="${esc(consoleTopicUrl(ref))}">${esc(ref.topic)}</a>` : esc(ref.topic);
      rows.push(`<tr data-topic="${esc(name)}">
        <td>${link}</td><td>${scalable ? "scalable" : "classic"}</td>
        <td class="num">${layout ? `${layout.active} <span class="muted">/ ${layout.total}</span>` : scalable ? "—" : "1"}</td>
        <td class="num">${rate(t && t.msgRateIn)}</td><td class="num">${rate(t && t.msgRateOut)}</td>
        <td class="num">${count(t && t.backlog)}</td><td class="num">${bytes(t && t.storageSize)}</td>
        <td class="num">${count(t && t.producers)}</td><td class="num">${count(t && t.consumers)}</td></tr>`);
    }
  }
  if (rows.length === 0) rows.push('<tr><td colspan="9" class="muted">No topics match.</td></tr>');
  // Live ticks re-render the rows: keep the keyboard focus on the link it was on.
  const focusedRow = document.activeElement && document.activeElement.closest ? document.activeElement.closest("tr[data-topic]") : null;
  const refocus = focusedRow ? focusedRow.dataset.topic : null;
  const body = main.querySelector("#topics tbody");
  body.innerHTML = rows.join("");
  if (refocus) {
    const link = [...body.querySelectorAll("tr[data-topic]")].find((r) => r.dataset.topic === refocus);
    if (link && link.querySelector("a")) link.querySelector("a").focus();
  }
  main.querySelector("#shown").textContent = `${shown} of ${state.topics.length} topics shown`;
  const tenants = new Set(state.namespaces.map((n) => n.split("/")[0]));
  main.querySelector("#cards").innerHTML = [
    ["Tenants", count(tenants.size)],
    ["Namespaces", count(state.namespaces.length)],
    ["Topics", count(state.topics.length)],
    ["msg/s in", rate(totals.in)],
    ["msg/s out", rate(totals.out)],
    ["Backlog", count(totals.backlog)],
    ["Producers", count(totals.producers)],
    ["Consumers", count(totals.consumers)],
  ].map(([label, value]) => `<div class="card"><div class="value">${value}</div><div class="label">${label}</div></div>`).join("");
}
