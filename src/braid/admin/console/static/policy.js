// The auto-scale policy form of a topic: each PIP-483 knob with the effective value as its
// placeholder and the topic override's value, if any, filled in. The knobs come from the
// effective policy the stats report (no copy of the table here); saving posts only the fields
// that are filled in (the rest fall through to the namespace's or the broker's policy).

import { esc } from "./shared.js";

export function policyForm(host, autoScale, { save, remove }) {
  const effective = autoScale.effectivePolicy || null;
  const override = (autoScale.overrides && autoScale.overrides.topic) || {};
  if (!effective) {
    host.innerHTML = `<p class="status error">${esc(autoScale.policyError || "No effective policy reported.")}</p>`;
    return;
  }
  const fields = Object.keys(effective).map((key) => {
    const value = override[key];
    if (typeof effective[key] === "boolean") {
      const chosen = value === undefined || value === null ? "" : String(value);
      return `<label>${esc(key)}
        <select name="${esc(key)}">
          <option value=""${chosen === "" ? " selected" : ""}>inherit (${esc(effective[key])})</option>
          <option value="true"${chosen === "true" ? " selected" : ""}>true</option>
          <option value="false"${chosen === "false" ? " selected" : ""}>false</option>
        </select></label>`;
    }
    return `<label>${esc(key)}
      <input name="${esc(key)}" type="number" step="any" min="0" value="${value === undefined || value === null ? "" : esc(value)}" placeholder="${esc(effective[key])}"></label>`;
  });
  const hasOverride = Object.keys(override).length > 0;
  host.innerHTML = `<form class="policy" novalidate>
      <p class="muted">${hasOverride ? "This topic has its own override." : "No topic override: the namespace's or broker's policy applies."} Empty fields inherit (placeholders show the effective values).</p>
      <div class="policy-grid">${fields.join("")}</div>
      <div class="toolbar">
        <button type="submit">Set policy…</button>
        <button type="button" class="secondary" id="policy-remove"${hasOverride ? "" : " disabled"}>Remove override…</button>
      </div>
    </form>`;
  const form = host.querySelector("form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const doc = {};
    for (const element of form.elements) {
      if (!element.name || element.value === "") continue;
      doc[element.name] = element.tagName === "SELECT" ? element.value === "true" : Number(element.value);
    }
    save(doc);
  });
  host.querySelector("#policy-remove").addEventListener("click", () => remove());
}
