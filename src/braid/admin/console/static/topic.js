// A scalable topic: its segment DAG with live traffic, the segment under the cursor, the
// timeline of splits and merges with the auto-scaler's reasons (and the decisions it did not
// take), each subscription's progress through the DAG and its consumers, and the actions (split,
// merge, auto-scale policy) behind a confirmation, all through the admin REST API.
//
// Data: the topic's metadata, stats and decision history from the REST API on load; then the
// console's event stream: a `dag` event per layout change (the DAG watch) and a `traffic` event
// per sampler tick. Stats (subscriptions, consumers, policy) are re-read after a layout change and
// every so often; the decision history whenever its `decisionSeq` moves.

import { buildModel, DagView, structuralChanges } from "./dag.js";
import { bytes, count, esc, get, hex, listen, rate, reasonText, request, scalablePath, time, ago } from "./shared.js";
import { confirmAction, setCrumbs, setLive, showTooltip, status } from "./ui.js";
import { policyForm } from "./policy.js";

const STATS_EVERY_MS = 10000;
const DECISIONS_EVERY_MS = 15000;
// The newest splits and merges listed at first (a long history renders on request).
const TIMELINE_ITEMS = 100;

export async function showTopic(main, ref) {
  const name = `topic://${ref.tenant}/${ref.namespace}/${ref.topic}`;
  setCrumbs([["Overview", "/console"], [`${ref.tenant}/${ref.namespace}`, null], [ref.topic, null]]);
  document.title = `${ref.topic} · Braid console`;
  main.innerHTML = `
    <h1>${esc(name)}</h1>
    <p class="muted" id="controller"></p>
    <div class="cards" id="cards"></div>
    <div class="layout">
      <section aria-labelledby="dag-title">
        <h2 id="dag-title">Segment DAG</h2>
        <div class="toolbar">
          <label>Colour draining for
            <select id="sub-filter"><option value="">all subscriptions</option></select>
          </label>
          <div class="legend" aria-hidden="true">
            <span><span class="swatch active"></span>active</span>
            <span><span class="swatch sealed"></span>sealed (drained)</span>
            <span><span class="swatch draining"></span>sealed, draining</span>
          </div>
        </div>
        <p class="muted">Epochs (numbered along the top) run left to right, the hash ring top to bottom. Hover or focus a segment for
          its details; arrow keys move between segments, Enter selects.</p>
        <div class="dag-wrap" id="dag"></div>
        <h2 id="timeline-title">Splits and merges</h2>
        <ol class="timeline" id="timeline" aria-labelledby="timeline-title"></ol>
        <h2 id="not-taken-title">Decisions not taken</h2>
        <p class="muted">What the auto-scaler considered and why it held back (repeats are folded).</p>
        <ol class="timeline" id="not-taken" aria-labelledby="not-taken-title"></ol>
        <h2>Subscriptions</h2>
        <div id="subscriptions"></div>
      </section>
      <aside>
        <section class="panel" aria-labelledby="seg-title">
          <h2 id="seg-title">Segment</h2>
          <div id="segment"><p class="muted">Select a segment in the DAG.</p></div>
          <p class="status" id="action-status" role="status" aria-live="polite"></p>
        </section>
        <section class="panel spaced" aria-labelledby="policy-title">
          <h2 id="policy-title">Auto-scale policy</h2>
          <div id="policy"></div>
        </section>
      </aside>
    </div>`;
  const page = new TopicPage(main, ref, name);
  await page.load();
  return page;
}

class TopicPage {
  constructor(main, ref, name) {
    this.main = main;
    this.ref = ref;
    this.name = name;
    this.model = null;
    this.brokers = {};
    this.controller = null;
    this.stats = { subscriptions: {}, autoScale: {} };
    this.decisions = { seq: 0, taken: [], notTaken: [] };
    this.decisionSeq = null;
    this.traffic = { topic: null, segments: {} };
    this.highlight = null;
    this.statsTimer = null;
    this.statsCost = 0;
    this.showAllChanges = false;
    this.dag = new DagView(main.querySelector("#dag"), {
      onSelect: (seg) => this.renderSegment(seg),
      onHover: (seg, rect) => showTooltip(seg ? this.tooltip(seg) : null, rect),
    });
    main.querySelector("#sub-filter").addEventListener("change", () => this.recolour());
    window.braidConsole.topic = this;
  }

  async load() {
    const [metadata, decisions] = await Promise.all([get(scalablePath(this.ref)), this.fetchDecisions()]);
    this.decisions = decisions;
    this.applyMetadata(metadata);
    await this.refreshStats();
    this.renderPolicy();
    const enc = encodeURIComponent;
    const { tenant, namespace, topic } = this.ref;
    listen(`/console/api/scalable/${enc(tenant)}/${enc(namespace)}/${enc(topic)}/events`, {
      dag: (doc) => this.onDag(doc),
      traffic: (doc) => this.onTraffic(doc),
      error: (doc) => status(this.main.querySelector("#action-status"), doc.reason, "error"),
    }, setLive);
    setInterval(() => {
      if (this.decisionSeq === null || this.decisionSeq === undefined) this.refreshDecisions();
    }, DECISIONS_EVERY_MS);
    this.scheduleStats(STATS_EVERY_MS);
  }

  // -- data ------------------------------------------------------------------------------------

  applyMetadata(metadata) {
    if (this.model && metadata.epoch < this.model.epoch) return false;
    const changed = !this.model || metadata.epoch !== this.model.epoch;
    this.model = buildModel(metadata);
    window.braidConsole.epoch = this.model.epoch;
    if (changed || !this.dag.model) {
      this.dag.setModel(this.model);
      this.dag.setTraffic(this.traffic.segments);
      window.braidConsole.lastRenderMs = this.dag.lastRenderMs;
    }
    this.recolour();
    this.renderCards();
    this.renderTimeline();
    const selected = this.dag.selected;
    this.renderSegment(selected === null ? null : this.model.segments.get(selected));
    return changed;
  }

  onDag(doc) {
    if (doc.error) {
      status(this.main.querySelector("#action-status"), doc.error, "error");
      return;
    }
    this.brokers = doc.segmentBrokers || {};
    this.controller = doc.controllerBrokerUrl;
    if (this.applyMetadata(doc.metadata)) {
      window.braidConsole.dagUpdates = (window.braidConsole.dagUpdates || 0) + 1;
      this.refreshDecisions();
      this.scheduleStats(300);
    }
  }

  onTraffic(doc) {
    this.traffic = doc;
    this.dag.setTraffic(doc.segments);
    this.recolour();
    this.renderCards();
    this.renderSubscriptions();
    if (doc.decisionSeq !== undefined && doc.decisionSeq !== null && doc.decisionSeq !== this.decisionSeq) {
      this.decisionSeq = doc.decisionSeq;
      this.refreshDecisions();
    } else if (doc.decisionSeq === null) {
      this.decisionSeq = null;
    }
  }

  fetchDecisions() {
    return get(scalablePath(this.ref, "/autoScaleDecisions")).catch(() => ({ seq: 0, taken: [], notTaken: [] }));
  }

  async refreshDecisions() {
    this.decisions = await this.fetchDecisions();
    this.renderTimeline();
  }

  scheduleStats(delay) {
    clearTimeout(this.statsTimer);
    this.statsTimer = setTimeout(async () => {
      await this.refreshStats();
      // A topic with thousands of segments makes stats costly: never spend over 10 % on it.
      this.scheduleStats(Math.max(STATS_EVERY_MS, this.statsCost * 10));
    }, delay);
  }

  async refreshStats() {
    const started = performance.now();
    try {
      this.stats = await get(scalablePath(this.ref, "/stats"));
    } catch (error) {
      status(this.main.querySelector("#action-status"), `stats: ${error.message}`, "error");
      return;
    }
    this.statsCost = performance.now() - started;
    if (!this.controller && this.stats.controller) this.controller = this.stats.controller.leaderBrokerUrl;
    this.renderSubscriptionFilter();
    this.recolour();
    this.renderCards();
    this.renderSubscriptions();
    this.renderPolicy(false);
  }

  // -- the DAG's colours and tooltip -------------------------------------------------------------

  drained(sub) {
    const info = this.stats.subscriptions[sub];
    const coordinator = info && info.coordinator;
    return coordinator ? new Set(coordinator.drainedSegments) : null;
  }

  isDraining(seg, sub, drained) {
    if (drained) return !drained.has(seg.id);
    const t = this.traffic.segments[String(seg.id)];
    return Boolean(t && t.subscriptions[sub] && t.subscriptions[sub].backlog > 0);
  }

  recolour() {
    const chosen = this.main.querySelector("#sub-filter").value;
    const subs = chosen ? [chosen] : Object.keys(this.stats.subscriptions || {});
    const drained = new Map(subs.map((s) => [s, this.drained(s)]));
    this.dag.setStateOf((seg) => {
      if (seg.active) return "active";
      for (const sub of subs) if (this.isDraining(seg, sub, drained.get(sub))) return "draining";
      return "sealed";
    });
  }

  tooltip(seg) {
    const t = this.traffic.segments[String(seg.id)];
    const size = seg.end - seg.start + 1;
    const rows = [
      ["Segment", `#${seg.id} (${seg.active ? "active" : "sealed"})`],
      ["Hash range", `${hex(seg.start)}–${hex(seg.end)} (${((size / 65536) * 100).toFixed(2)} %)`],
      ["Parents", seg.parents.length ? seg.parents.map((p) => `#${p}`).join(", ") : "none (initial)"],
      ["Children", seg.children.length ? seg.children.map((c) => `#${c}`).join(", ") : "none"],
      ["Created", `epoch ${seg.createdEpoch}${seg.createdMs ? `, ${time(seg.createdMs)}` : ""}`],
    ];
    if (!seg.active) rows.push(["Sealed", `epoch ${seg.sealedEpoch}${seg.sealedMs ? `, ${time(seg.sealedMs)}` : ""}`]);
    rows.push(["Owner", this.brokers[String(seg.id)] || (seg.active ? "—" : "none (sealed)")]);
    if (t) {
      rows.push(["msg/s", `${rate(t.msgRateIn)} in, ${rate(t.msgRateOut)} out`]);
      rows.push(["Backlog", `${count(t.backlog)} entries, ${bytes(t.storageSize)} stored`]);
      for (const [sub, s] of Object.entries(t.subscriptions)) rows.push([`· ${sub}`, `${count(s.backlog)} left, ${s.consumers} consumer(s)`]);
    } else {
      rows.push(["Traffic", "not loaded on this broker"]);
    }
    return `<dl>${rows.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join("")}</dl>`;
  }

  // -- rendering -----------------------------------------------------------------------------

  renderCards() {
    if (!this.model) return;
    const segs = [...this.model.segments.values()];
    const active = segs.filter((s) => s.active).length;
    const total = this.traffic.topic;
    const auto = this.stats.autoScale || {};
    const policy = auto.effectivePolicy;
    const autoText = auto.policyError ? "policy error" : policy ? (policy.enabled ? (auto.running ? "on (running)" : "on") : "off") : "—";
    const cards = [
      ["Epoch", count(this.model.epoch)],
      ["Active segments", count(active)],
      ["All segments", count(segs.length)],
      ["msg/s in", rate(total && total.msgRateIn)],
      ["msg/s out", rate(total && total.msgRateOut)],
      ["Backlog", count(total && total.backlog)],
      ["Storage", bytes(total && total.storageSize)],
      ["Auto-scale", autoText],
    ];
    this.main.querySelector("#controller").textContent = `Controller leader: ${this.controller || "electing…"}`;
    this.main.querySelector("#cards").innerHTML = cards
      .map(([label, value]) => `<div class="card"><div class="value">${esc(value)}</div><div class="label">${esc(label)}</div></div>`)
      .join("");
  }

  renderSubscriptionFilter() {
    const select = this.main.querySelector("#sub-filter");
    const names = Object.keys(this.stats.subscriptions || {}).sort();
    const have = [...select.options].map((o) => o.value).filter(Boolean);
    if (have.join("\n") === names.join("\n")) return;
    const chosen = select.value;
    select.innerHTML = `<option value="">all subscriptions</option>${names.map((n) => `<option>${esc(n)}</option>`).join("")}`;
    select.value = names.includes(chosen) ? chosen : "";
  }

  renderTimeline() {
    if (!this.model) return;
    const taken = this.decisions.taken || [];
    const changes = structuralChanges(this.model).reverse();
    const shown = this.showAllChanges ? changes : changes.slice(0, TIMELINE_ITEMS);
    const items = shown.map((change) => {
      const decision = taken.find((d) => d.action === change.kind && sameIds(change.kind === "split" ? [change.parents[0]] : change.parents, d.segmentIds || []));
      const what = change.kind === "split"
        ? `Split #${change.parents[0]} → ${change.children.map((c) => `#${c}`).join(", ")}`
        : `Merge ${change.parents.map((p) => `#${p}`).join(" + ")} → #${change.children[0]}`;
      const detail = decision ? reasonText(decision.detail) : "";
      const why = decision
        ? `auto-scaler (${decision.trigger}): ${detail.startsWith(decision.reason) ? detail : `${decision.reason} — ${detail}`}`
        : "no auto-scaler record: a manual change (admin API), or older than this leader's history";
      return `<li class="${change.kind}" data-epoch="${change.epoch}" data-auto="${decision ? "1" : "0"}">
        <div><strong>${esc(what)}</strong></div>
        <div class="why">${esc(why)}</div>
        <div class="when">epoch ${change.epoch} · ${esc(time(change.atMs))} ${esc(ago(change.atMs))}</div></li>`;
    });
    for (const failure of taken.filter((d) => d.action === "failed").reverse()) {
      items.push(`<li class="failed"><div><strong>Failed (${esc(failure.trigger)})</strong></div><div class="why">${esc(reasonText(failure.detail))}</div><div class="when">${esc(time(failure.atMs))}</div></li>`);
    }
    if (shown.length < changes.length) {
      items.push(`<li class="more"><button type="button" class="secondary" id="timeline-all">Show all ${changes.length} changes</button></li>`);
    }
    const list = this.main.querySelector("#timeline");
    list.innerHTML = items.length ? items.join("") : '<li class="muted">No split or merge yet: the topic has its initial segments.</li>';
    const more = list.querySelector("#timeline-all");
    if (more) {
      more.addEventListener("click", () => {
        this.showAllChanges = true;
        this.renderTimeline();
      });
    }
    const notTaken = (this.decisions.notTaken || []).slice().reverse().map((d) => `<li class="none">
      <div><strong>${esc(d.reason.replaceAll("_", " "))}</strong>${d.count > 1 ? ` <span class="muted">× ${d.count}</span>` : ""}</div>
      <div class="why">${esc(reasonText(d.detail))}</div>
      <div class="when">${d.count > 1 ? `${esc(time(d.firstAtMs))} – ` : ""}${esc(time(d.atMs))} · ${esc(d.trigger)}</div></li>`);
    this.main.querySelector("#not-taken").innerHTML = notTaken.length ? notTaken.join("") : '<li class="muted">None recorded by this broker (the auto-scaler runs on the controller leader).</li>';
  }

  renderSubscriptions() {
    const host = this.main.querySelector("#subscriptions");
    const subs = this.stats.subscriptions || {};
    const names = Object.keys(subs).sort();
    if (!this.model) return;
    if (names.length === 0) {
      host.innerHTML = '<p class="muted">No subscriptions.</p>';
      return;
    }
    const sealed = [...this.model.segments.values()].filter((s) => !s.active);
    const trafficTopic = this.traffic.topic;
    host.innerHTML = names.map((sub) => {
      const info = subs[sub];
      const drained = this.drained(sub);
      const done = sealed.filter((s) => !this.isDraining(s, sub, drained)).length;
      const pct = sealed.length ? Math.round((done / sealed.length) * 100) : 100;
      const backlog = trafficTopic && trafficTopic.subscriptions[sub] ? trafficTopic.subscriptions[sub].backlog : null;
      const consumers = info.coordinator ? Object.entries(info.coordinator.consumers) : (info.registeredConsumers || []).map((n) => [n, null]);
      const rows = consumers.map(([consumer, c]) => `<tr data-consumer="${esc(consumer)}" data-sub="${esc(sub)}">
          <td><button type="button" class="secondary show-assigned" aria-pressed="false">${esc(consumer)}</button></td>
          <td>${c ? (c.connected ? "connected" : c.inGracePeriod ? "in grace period" : "disconnected") : "registered"}</td>
          <td>${c ? c.assignedSegments.map((id) => `<span class="chip">#${id}</span>`).join("") : "—"}</td></tr>`).join("");
      return `<h3>${esc(sub)} <span class="muted">(${esc(info.type)})</span></h3>
        <p>Sealed segments drained: ${done} / ${sealed.length}
          <progress max="100" value="${pct}" aria-label="${esc(sub)}: ${pct} % of sealed segments drained">${pct} %</progress>
          · backlog ${count(backlog)}</p>
        ${rows ? `<table><thead><tr><th scope="col">Consumer (show its segments)</th><th scope="col">State</th><th scope="col">Assigned segments</th></tr></thead><tbody>${rows}</tbody></table>` : '<p class="muted">No consumers.</p>'}`;
    }).join("");
    for (const button of host.querySelectorAll("button.show-assigned")) {
      const row = button.closest("tr");
      const key = `${row.dataset.sub}\u0000${row.dataset.consumer}`;
      button.setAttribute("aria-pressed", String(this.highlight === key));
      button.addEventListener("click", () => {
        this.highlight = this.highlight === key ? null : key;
        const c = this.highlight && this.stats.subscriptions[row.dataset.sub].coordinator;
        this.dag.setHighlighted(c ? c.consumers[row.dataset.consumer].assignedSegments : []);
        for (const b of host.querySelectorAll("button.show-assigned")) b.setAttribute("aria-pressed", "false");
        button.setAttribute("aria-pressed", String(this.highlight === key));
      });
    }
  }

  renderSegment(seg) {
    const host = this.main.querySelector("#segment");
    if (!seg) {
      host.innerHTML = '<p class="muted">Select a segment in the DAG.</p>';
      return;
    }
    const t = this.traffic.segments[String(seg.id)];
    const lines = [
      `<p><strong>#${seg.id}</strong> · ${seg.active ? "active" : `sealed at epoch ${seg.sealedEpoch}`}</p>`,
      `<p>${hex(seg.start)}–${hex(seg.end)} · parents ${seg.parents.map((p) => `#${p}`).join(", ") || "none"} · children ${seg.children.map((c) => `#${c}`).join(", ") || "none"}</p>`,
      t ? `<p>${rate(t.msgRateIn)} msg/s in, ${rate(t.msgRateOut)} out · backlog ${count(t.backlog)}</p>` : "",
    ];
    if (seg.active) {
      const below = this.neighbour(seg, -1);
      const above = this.neighbour(seg, +1);
      lines.push(`<div class="toolbar">
        <button type="button" id="split-mid">Split at midpoint</button>
        <label>Split at hash (hex) <input id="split-hash" inputmode="text" size="8" placeholder="${hex(Math.floor((seg.start + seg.end + 1) / 2))}"></label>
        <button type="button" id="split-at" class="secondary">Split at hash</button></div>`);
      lines.push(`<div class="toolbar">
        ${below ? `<button type="button" class="secondary" id="merge-below">Merge with #${below.id} (lower)</button>` : ""}
        ${above ? `<button type="button" class="secondary" id="merge-above">Merge with #${above.id} (upper)</button>` : ""}
        ${below || above ? "" : '<span class="muted">No adjacent active segment to merge with.</span>'}</div>`);
    }
    host.innerHTML = lines.join("");
    if (!seg.active) return;
    host.querySelector("#split-mid").addEventListener("click", () => this.split(seg, null));
    host.querySelector("#split-at").addEventListener("click", () => {
      const text = host.querySelector("#split-hash").value.trim().replace(/^0x/i, "");
      const at = parseInt(text, 16);
      if (!/^[0-9a-f]{1,4}$/i.test(text) || !(at > seg.start && at <= seg.end)) {
        status(this.main.querySelector("#action-status"), `Enter a hex hash in ${hex(seg.start + 1)}–${hex(seg.end)}: the first hash of the upper child.`, "error");
        return;
      }
      this.split(seg, at);
    });
    for (const [id, other] of [["merge-below", this.neighbour(seg, -1)], ["merge-above", this.neighbour(seg, +1)]]) {
      const button = host.querySelector(`#${id}`);
      if (button) button.addEventListener("click", () => this.merge(seg, other));
    }
  }

  neighbour(seg, direction) {
    for (const other of this.model.segments.values()) {
      if (!other.active) continue;
      if (direction < 0 && other.end === seg.start - 1) return other;
      if (direction > 0 && other.start === seg.end + 1) return other;
    }
    return null;
  }

  renderPolicy(force = true) {
    const host = this.main.querySelector("#policy");
    if (!force && host.contains(document.activeElement)) return; // never under the user's fingers
    policyForm(host, this.stats.autoScale || {}, {
      save: (doc) => this.act(`Set the auto-scale policy of ${this.name}?`, `Topic override: ${JSON.stringify(doc)}`, "Set policy", () => request("POST", scalablePath(this.ref, "/autoScalePolicy"), doc), "Auto-scale policy set."),
      remove: () => this.act(`Remove the topic's auto-scale override?`, "The namespace's or the broker's policy applies again.", "Remove override", () => request("DELETE", scalablePath(this.ref, "/autoScalePolicy")), "Override removed."),
    });
  }

  // -- actions -----------------------------------------------------------------------------------

  split(seg, at) {
    const where = at === null ? "at its midpoint" : `at ${hex(at)}`;
    return this.act(
      `Split segment #${seg.id} ${where}?`,
      `Segment #${seg.id} (${hex(seg.start)}–${hex(seg.end)}) is sealed and two children take over its hash range. Producers and consumers follow by themselves.`,
      `Split #${seg.id}`,
      () => request("POST", scalablePath(this.ref, `/split/${seg.id}`), at === null ? {} : { splitHash: at }),
      `Split #${seg.id} ${where}.`,
    );
  }

  merge(seg, other) {
    const ids = [seg.id, other.id].sort((a, b) => a - b);
    return this.act(
      `Merge segments #${ids[0]} and #${ids[1]}?`,
      "Both are sealed and one child takes over their joint hash range.",
      "Merge",
      () => request("POST", scalablePath(this.ref, `/merge/${ids[0]}/${ids[1]}`), {}),
      `Merged #${ids[0]} and #${ids[1]}.`,
    );
  }

  async act(title, body, okText, call, doneText) {
    const line = this.main.querySelector("#action-status");
    if (!(await confirmAction(title, body, okText))) {
      status(line, "Cancelled.");
      return;
    }
    status(line, "Working…");
    try {
      const answer = await call();
      if (answer && answer.segments) this.applyMetadata(answer);
      status(line, `${doneText}${answer && answer.epoch !== undefined ? ` Epoch ${answer.epoch}.` : ""}`, "done");
      await this.refreshStats();
      this.renderPolicy();
    } catch (error) {
      status(line, error.forbidden ? `Not allowed: ${error.message}` : `Refused: ${error.message}`, "error");
    }
  }
}

function sameIds(a, b) {
  if (a.length !== b.length) return false;
  const x = a.slice().sort((p, q) => p - q);
  const y = b.slice().sort((p, q) => p - q);
  return x.every((v, i) => v === y[i]);
}
