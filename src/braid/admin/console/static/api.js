// The admin REST API, as the console calls it: one place for headers and errors.
//
// Every call goes to the same /admin/v2 endpoints the CLI and AdminClient use, with the page's
// own credentials (cookies of this origin; when the admin API gains authentication, its headers
// are added here and the API's role checks apply to the console's actions as to any client).
// State-changing calls always send `Content-Type: application/json`.

export class ApiError extends Error {
  constructor(status, reason) {
    super(reason);
    this.status = status;
  }
  get forbidden() {
    return this.status === 401 || this.status === 403;
  }
}

function requestHeaders(hasBody) {
  const headers = { Accept: "application/json" };
  if (hasBody) headers["Content-Type"] = "application/json";
  return headers;
}

export async function request(method, path, body) {
  const changing = method !== "GET";
  const response = await fetch(path, {
    method,
    credentials: "same-origin",
    headers: requestHeaders(changing),
    body: changing ? JSON.stringify(body === undefined ? {} : body) : undefined,
  });
  const text = await response.text();
  let doc = null;
  if (text) {
    try {
      doc = JSON.parse(text);
    } catch {
      doc = text;
    }
  }
  if (!response.ok) {
    const reason = doc && typeof doc === "object" && doc.reason ? doc.reason : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, reason);
  }
  return doc;
}

export const get = (path) => request("GET", path);

const enc = encodeURIComponent;

/** `/admin/v2/scalable/{tenant}/{namespace}/{topic}` plus `suffix`. */
export function scalablePath(ref, suffix = "") {
  return `/admin/v2/scalable/${enc(ref.tenant)}/${enc(ref.namespace)}/${enc(ref.topic)}${suffix}`;
}

/** `topic://t/ns/x` or `persistent://t/ns/x` -> {domain, tenant, namespace, topic}. */
export function parseTopicName(name) {
  const match = /^([a-z-]+):\/\/([^/]+)\/([^/]+)\/(.+)$/.exec(name);
  if (!match) return null;
  return { domain: match[1], tenant: match[2], namespace: match[3], topic: match[4] };
}

export function consoleTopicUrl(ref) {
  return `/console/topic/${enc(ref.tenant)}/${enc(ref.namespace)}/${enc(ref.topic)}`;
}

/** Listen to a console event stream; `handlers` maps event names to callbacks. */
export function listen(path, handlers, onState) {
  const source = new EventSource(path);
  source.onopen = () => onState && onState(true);
  source.onerror = () => onState && onState(false);
  for (const [name, handler] of Object.entries(handlers)) {
    source.addEventListener(name, (event) => handler(JSON.parse(event.data)));
  }
  // Leaving the page must free the connection at once: a page kept for back/forward would hold
  // it, and browsers allow only six per host.
  window.addEventListener("pagehide", () => source.close());
  return source;
}
