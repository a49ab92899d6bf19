// Text contrast of the page (WCAG 2 relative luminance): every piece of visible text whose
// ratio to its background is below 4.5:1, as "element text ratio" strings. Run by
// test_console.py with execute_script.
const parse = s => (s.match(/[\d.]+/g) || []).map(Number);
const lum = c => {
  const v = c.slice(0, 3).map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
};
const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
const background = el => {
  for (let e = el; e; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c;
  }
  return [255, 255, 255];
};
const worst = [];
for (const el of document.querySelectorAll('body *')) {
  if (el.closest('svg') || el.closest('dialog:not([open])') || el.closest('[hidden]')) continue;
  const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  if (!own || el.getClientRects().length === 0) continue;
  const r = ratio(parse(getComputedStyle(el).color), background(el));
  if (r < 4.5) worst.push(`${el.tagName} "${el.textContent.trim().slice(0, 30)}" ${r.toFixed(2)}`);
}
for (const text of document.querySelectorAll('svg.dag g.seg text')) {
  const rect = text.parentNode.querySelector('rect');
  const r = ratio(parse(getComputedStyle(text).fill), parse(getComputedStyle(rect).fill));
  if (r < 4.5) worst.push(`segment label "${text.textContent}" ${r.toFixed(2)}`);
}
for (const text of document.querySelectorAll('svg.dag .axis text')) {
  const r = ratio(parse(getComputedStyle(text).fill), background(text.closest('.dag-wrap')));
  if (r < 4.5) worst.push(`axis "${text.textContent}" ${r.toFixed(2)}`);
}
return worst;
