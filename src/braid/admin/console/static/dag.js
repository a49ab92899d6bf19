// The segment DAG of a scalable topic, drawn left to right by epoch.
//
// x is the epoch (a segment's box spans from the epoch that created it to the one that sealed
// it, or to now while active); y is the hash ring 0x0000-0xffff, so each box is as tall as its
// hash range and, at any epoch, the live segments tile the column. Parents sit just left of their
// children, so lineage reads without drawing edges; hovering or focusing a segment outlines its
// parents and children. One SVG string is built per layout change (fast for thousands of boxes);
// traffic ticks only update the labels and classes in place, so focus and hover survive them.
// Keyboard: the DAG is one tab stop (roving tabindex); arrows move between neighbours (up/down in
// the hash ring, left to a parent, right to a child), Enter or Space selects.

import { esc, hex, rate } from "./format.js";

const RING = 65536;
const AXIS_TOP = 24;
const AXIS_LEFT = 52;
const HEIGHT = 360;
const MIN_COL = 3;
const MAX_COL = 320;

/** The ScalableTopicMetadata JSON (the admin API's shape) as the view's model. */
export function buildModel(metadata) {
  const segments = new Map();
  for (const [key, doc] of Object.entries(metadata.segments || {})) {
    const id = Number(key);
    segments.set(id, {
      id,
      start: doc.hashRange.start,
      end: doc.hashRange.end,
      active: doc.state === "ACTIVE",
      parents: doc.parentIds || [],
      children: doc.childIds || [],
      createdEpoch: doc.createdAtEpoch,
      sealedEpoch: doc.state === "ACTIVE" ? null : doc.sealedAtEpoch,
      createdMs: doc.createdAtMs || 0,
      sealedMs: doc.sealedAtMs || 0,
    });
  }
  return { epoch: metadata.epoch, segments, properties: metadata.properties || {} };
}

/** Splits and merges, oldest first, read from the DAG itself (complete, whoever made them). */
export function structuralChanges(model) {
  const changes = [];
  for (const seg of model.segments.values()) {
    if (seg.parents.length === 1) {
      const parent = model.segments.get(seg.parents[0]);
      const siblings = parent ? parent.children : [seg.id];
      if (Math.min(...siblings) !== seg.id) continue; // one entry per split
      changes.push({ kind: "split", epoch: seg.createdEpoch, atMs: seg.createdMs, parents: [seg.parents[0]], children: siblings.slice().sort((a, b) => a - b) });
    } else if (seg.parents.length >= 2) {
      changes.push({ kind: "merge", epoch: seg.createdEpoch, atMs: seg.createdMs, parents: seg.parents.slice().sort((a, b) => a - b), children: [seg.id] });
    }
  }
  return changes.sort((a, b) => a.epoch - b.epoch);
}

export class DagView {
  constructor(container, { onSelect, onHover } = {}) {
    this.container = container;
    this.onSelect = onSelect || (() => {});
    this.onHover = onHover || (() => {});
    this.model = null;
    this.labels = new Map();
    this.groups = new Map();
    this.traffic = {};
    this.selected = null;
    this.focusId = null;
    this.stateOf = (seg) => (seg.active ? "active" : "sealed");
    this.highlighted = new Set();
    this.thin = new Set();
    this.lastRenderMs = 0;
    container.addEventListener("click", (e) => this._pick(e, true));
    container.addEventListener("pointerover", (e) => this._hover(e));
    container.addEventListener("pointerleave", () => this.onHover(null));
    container.addEventListener("focusin", (e) => this._hover(e));
    container.addEventListener("focusout", () => this.onHover(null));
    container.addEventListener("keydown", (e) => this._key(e));
  }

  setModel(model) {
    this.model = model;
    if (this.selected !== null && !model.segments.has(this.selected)) this.selected = null;
    this.render();
  }

  /** `stateOf(seg)` -> "active" | "sealed" | "draining" (the colour), then re-colour. */
  setStateOf(stateOf) {
    this.stateOf = stateOf;
    this._restyle();
  }

  setTraffic(segments) {
    this.traffic = segments || {};
    for (const [id, text] of this.labels) text.textContent = this._label(this.model.segments.get(id));
    this._restyle();
  }

  setHighlighted(ids) {
    this.highlighted = new Set(ids);
    this._restyle();
  }

  select(id) {
    this.selected = id;
    this._restyle();
    this.onSelect(id === null ? null : this.model.segments.get(id));
  }

  render() {
    const started = performance.now();
    const model = this.model;
    const columns = model.epoch + 1;
    const avail = Math.max(300, this.container.clientWidth - AXIS_LEFT - 12);
    const col = Math.max(MIN_COL, Math.min(MAX_COL, avail / columns));
    const width = AXIS_LEFT + columns * col + 12;
    const y = (hash) => AXIS_TOP + (hash / RING) * HEIGHT;
    const parts = [];
    parts.push(`<svg class="dag" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${AXIS_TOP + HEIGHT + 8}" role="group" aria-label="Segment DAG: epochs left to right, hash ring top to bottom">`);
    parts.push(this._axes(columns, col, y));
    const focusId = this._initialFocus();
    const thin = new Set();
    for (const seg of model.segments.values()) {
      const x0 = AXIS_LEFT + seg.createdEpoch * col;
      const until = seg.active ? columns : seg.sealedEpoch;
      const w = Math.max(1, (until - seg.createdEpoch) * col - 1);
      const top = y(seg.start);
      const h = Math.max(1, y(seg.end + 1) - top - 0.5);
      const state = seg.active ? "active" : "sealed";
      if (h < 4 || w < 4) thin.add(seg.id); // no outline: it would hide a box this small
      const label = w >= 34 && h >= 13
        ? `<text x="${(x0 + 4).toFixed(1)}" y="${(top + Math.min(h / 2 + 4, 15)).toFixed(1)}">${esc(this._label(seg))}</text>`
        : "";
      parts.push(
        `<g class="seg ${state}" data-id="${seg.id}" tabindex="${seg.id === focusId ? 0 : -1}" role="button" aria-label="Segment ${seg.id}, ${state}, ${hex(seg.start)} to ${hex(seg.end)}">` +
          `<rect x="${x0.toFixed(1)}" y="${top.toFixed(2)}" width="${w.toFixed(1)}" height="${h.toFixed(2)}"></rect>${label}</g>`,
      );
    }
    parts.push("</svg>");
    this.container.innerHTML = parts.join("");
    this.labels.clear();
    this.groups.clear();
    for (const g of this.container.querySelectorAll("g.seg")) {
      const id = Number(g.dataset.id);
      this.groups.set(id, g);
      const text = g.querySelector("text");
      if (text) this.labels.set(id, text);
    }
    this.focusId = focusId;
    this.thin = thin;
    this._restyle();
    this.lastRenderMs = performance.now() - started;
    return this.lastRenderMs;
  }

  _axes(columns, col, y) {
    const out = ['<g class="axis">'];
    for (const hash of [0, 0x4000, 0x8000, 0xc000, 0xffff]) {
      const yy = y(hash === 0xffff ? RING : hash);
      out.push(`<text x="4" y="${(yy + 4).toFixed(1)}">${hex(hash)}</text>`);
      out.push(`<line x1="${AXIS_LEFT - 4}" x2="${AXIS_LEFT}" y1="${yy}" y2="${yy}"></line>`);
    }
    const every = Math.max(1, Math.ceil(40 / col));
    for (let epoch = 0; epoch < columns; epoch += every) {
      out.push(`<text x="${(AXIS_LEFT + epoch * col + 2).toFixed(1)}" y="14">${epoch}</text>`);
    }
    out.push("</g>");
    return out.join("");
  }

  _label(seg) {
    const t = this.traffic[String(seg.id)];
    if (!seg.active) return t && t.backlog ? `#${seg.id} · ${t.backlog} left` : `#${seg.id}`;
    return t ? `#${seg.id} · ${rate(t.msgRateIn)}/s` : `#${seg.id}`;
  }

  _restyle() {
    if (!this.model) return;
    const related = new Set();
    if (this.selected !== null) {
      const seg = this.model.segments.get(this.selected);
      if (seg) for (const id of [...seg.parents, ...seg.children]) related.add(id);
    }
    for (const [id, g] of this.groups) {
      const seg = this.model.segments.get(id);
      const state = this.stateOf(seg);
      g.setAttribute(
        "class",
        `seg ${state}${this.thin.has(id) ? " thin" : ""}${id === this.selected ? " selected" : ""}${related.has(id) ? " related" : ""}${this.highlighted.has(id) ? " assigned" : ""}`,
      );
    }
  }

  _initialFocus() {
    const model = this.model;
    if (this.focusId !== null && model.segments.has(this.focusId)) return this.focusId;
    if (this.selected !== null) return this.selected;
    let best = null;
    for (const seg of model.segments.values()) if (seg.active && (best === null || seg.start < best.start)) best = seg;
    return best ? best.id : null;
  }

  _segmentOf(event) {
    const g = event.target.closest ? event.target.closest("g.seg") : null;
    return g ? Number(g.dataset.id) : null;
  }

  _pick(event) {
    const id = this._segmentOf(event);
    if (id === null) return;
    this._moveFocus(id);
    this.select(id);
  }

  _hover(event) {
    const id = this._segmentOf(event);
    if (id === null) return;
    const g = this.groups.get(id);
    this.onHover(this.model.segments.get(id), event.type === "focusin" ? g.getBoundingClientRect() : { left: event.clientX, bottom: event.clientY + 8 });
  }

  _moveFocus(id) {
    const old = this.groups.get(this.focusId);
    if (old) old.setAttribute("tabindex", "-1");
    const g = this.groups.get(id);
    if (!g) return;
    g.setAttribute("tabindex", "0");
    this.focusId = id;
    g.focus();
  }

  _key(event) {
    const id = this._segmentOf(event);
    if (id === null) return;
    const seg = this.model.segments.get(id);
    let next = null;
    switch (event.key) {
      case "ArrowUp":
        next = this._at(seg.createdEpoch, seg.start - 1);
        break;
      case "ArrowDown":
        next = this._at(seg.createdEpoch, seg.end + 1);
        break;
      case "ArrowLeft":
        next = seg.parents.length ? seg.parents[0] : null;
        break;
      case "ArrowRight":
        next = seg.children.length ? seg.children[0] : null;
        break;
      case "Enter":
      case " ":
        event.preventDefault();
        this.select(id);
        return;
      default:
        return;
    }
    event.preventDefault();
    if (next !== null) this._moveFocus(next);
  }

  /** The segment live at `epoch` that holds `hash`. */
  _at(epoch, hash) {
    if (hash < 0 || hash >= RING) return null;
    for (const seg of this.model.segments.values()) {
      const until = seg.active ? Infinity : seg.sealedEpoch;
      if (seg.start <= hash && hash <= seg.end && seg.createdEpoch <= epoch && epoch < until) return seg.id;
    }
    return null;
  }
}
