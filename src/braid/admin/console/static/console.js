// The Braid console's entry point: picks the page from the URL (/console is the overview,
// /console/topic/{tenant}/{namespace}/{topic} a scalable topic) and keeps the health badge fresh.

import { showOverview } from "./overview.js";
import { showTopic } from "./topic.js";
import { refreshHealth } from "./ui.js";

const HEALTH_EVERY_MS = 10000;

async function start() {
  const main = document.getElementById("main");
  refreshHealth();
  setInterval(refreshHealth, HEALTH_EVERY_MS);
  const match = /^\/console\/topic\/([^/]+)\/([^/]+)\/([^/]+)\/?$/.exec(window.location.pathname);
  window.braidConsole = { page: match ? "topic" : "overview" };
  try {
    if (match) {
      const [tenant, namespace, topic] = match.slice(1).map(decodeURIComponent);
      await showTopic(main, { tenant, namespace, topic });
    } else {
      await showOverview(main);
    }
  } catch (error) {
    main.innerHTML = "";
    const p = document.createElement("p");
    p.className = "status error";
    p.textContent = `Could not load this page: ${error.message}`;
    main.append(p);
  }
  window.braidConsole.ready = true;
}

start();
