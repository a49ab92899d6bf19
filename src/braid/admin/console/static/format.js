// Number, size, time and text formatting shared by the console's pages.

export function rate(value) {
  if (value === undefined || value === null) return "—";
  if (value === 0) return "0";
  if (value < 10) return value.toFixed(2);
  if (value < 1000) return value.toFixed(1);
  if (value < 1e6) return `${(value / 1e3).toFixed(1)}k`;
  return `${(value / 1e6).toFixed(2)}M`;
}

export function count(value) {
  if (value === undefined || value === null) return "—";
  return Number(value).toLocaleString("en-US");
}

export function bytes(value) {
  if (value === undefined || value === null) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(value);
  let unit = 0;
  while (v >= 1024 && unit < units.length - 1) {
    v /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${v} B` : `${v.toFixed(1)} ${units[unit]}`;
}

export function hex(hash) {
  return `0x${Number(hash).toString(16).padStart(4, "0")}`;
}

export function duration(ms) {
  const s = ms / 1000;
  if (s < 1) return `${ms} ms`;
  if (s < 60) return `${+s.toFixed(1)} s`;
  if (s < 3600) return `${+(s / 60).toFixed(1)} min`;
  if (s < 86400) return `${+(s / 3600).toFixed(1)} h`;
  return `${+(s / 86400).toFixed(1)} d`;
}

// One formatter for every call: building an Intl formatter per call costs ~0.5 ms, which a
// 1,000-segment timeline cannot afford.
const CLOCK = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });

export function time(ms) {
  if (!ms) return "—";
  const clock = CLOCK.format(ms);
  if (Math.abs(Date.now() - ms) < 20 * 3600 * 1000) return clock;
  return `${new Date(ms).toISOString().slice(0, 10)} ${clock}`;
}

export function ago(ms) {
  if (!ms) return "";
  const delta = Date.now() - ms;
  return delta < 0 ? "just now" : `${duration(Math.round(delta))} ago`;
}

/** An auto-scaler reason made readable: "3.00x" -> "3.00×", "300000 ms" -> "5 min". */
export function reasonText(text) {
  if (!text) return "";
  return String(text)
    .replace(/(\d)x\b/g, "$1×")
    .replace(/\b(\d{4,}) ms\b/g, (_, n) => duration(Number(n)));
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text made safe for innerHTML. */
export function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ESCAPES[c]);
}
