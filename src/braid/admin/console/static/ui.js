// Shared page furniture: breadcrumbs, the broker-health and live badges, the confirmation
// dialog, the tooltip and status lines.

import { esc, get } from "./shared.js";

export function setCrumbs(items) {
  const list = document.getElementById("crumbs");
  list.innerHTML = items
    .map(([text, href]) => (href ? `<li><a href="${esc(href)}">${esc(text)}</a></li>` : `<li aria-current="page">${esc(text)}</li>`))
    .join("");
}

export function setLive(connected) {
  const badge = document.getElementById("live");
  badge.textContent = connected ? "live" : "reconnecting…";
  badge.className = connected ? "badge ok" : "badge warn";
}

export async function refreshHealth() {
  const badge = document.getElementById("health");
  try {
    const health = await get("/health");
    let ok = health.status === "ok";
    let text = ok ? "broker ok" : `broker ${health.status}: ${health.reason || ""}`;
    try {
      await get("/admin/v2/brokers/health");
    } catch (error) {
      ok = false;
      text = `broker unhealthy: ${error.message}`;
    }
    badge.textContent = text;
    badge.className = ok ? "badge ok" : "badge warn";
  } catch (error) {
    badge.textContent = `broker unreachable: ${error.message}`;
    badge.className = "badge bad";
  }
}

/** Ask before acting; resolves true when confirmed. */
export function confirmAction(title, body, okText = "Confirm", danger = false) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-body").textContent = body;
  const ok = document.getElementById("confirm-ok");
  ok.textContent = okText;
  ok.className = danger ? "danger" : "";
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    ok.focus();
  });
}

export function showTooltip(html, rect) {
  const tip = document.getElementById("tooltip");
  if (html === null) {
    tip.hidden = true;
    return;
  }
  tip.innerHTML = html;
  tip.hidden = false;
  const width = tip.offsetWidth;
  const left = Math.min(rect.left, window.innerWidth - width - 8);
  tip.style.left = `${Math.max(4, left)}px`;
  tip.style.top = `${Math.min(rect.bottom + 6, window.innerHeight - tip.offsetHeight - 4)}px`;
}

export function status(element, text, kind = "") {
  element.textContent = text;
  element.className = `status ${kind}`;
}
