// The console's entry: the header (views, token field) and the hash router that draws
// one view per address: #/plans/<name>, #/run/<name>, #/compare/<a>/<b>, #/live.
// Runs on the page's one thread.

import { getToken, setToken } from "./api.js";
import { h, link, replace } from "./dom.js";
import { errorBox } from "./ui.js";
import { renderCompare } from "./view-compare.js";
import { renderLive } from "./view-live.js";
import { renderPlans } from "./view-plans.js";
import { renderRun } from "./view-run.js";

const content = h("main", { id: "view" });
let stopView: (() => void) | null = null;

function header(): HTMLElement {
  const token = h("input", { type: "password", id: "token", placeholder: "API token (if rankd asks for one)", autocomplete: "off", value: getToken() });
  token.addEventListener("change", () => {
    setToken(token.value.trim());
    void render();
  });
  // In a form of its own: Enter in the field saves it and reloads the view.
  const form = h("form", { class: "token" }, h("label", { for: "token" }, "token "), token);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    token.dispatchEvent(new Event("change"));
  });
  return h("header", {},
    h("span", { class: "brand" }, "rankd console"),
    h("nav", {}, link("#/plans", "Plans"), link("#/run", "Run"), link("#/compare/feed/home_light", "Compare"), link("#/live", "Live")),
    form);
}

/** The address split into its path segments (decoded) and its query. */
function parseHash(hash: string): { parts: string[]; query: URLSearchParams } {
  const body = hash.replace(/^#\/?/, "");
  const q = body.indexOf("?");
  const path = q < 0 ? body : body.slice(0, q);
  const parts = path.split("/").filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  return { parts, query: new URLSearchParams(q < 0 ? "" : body.slice(q + 1)) };
}

async function render(): Promise<void> {
  stopView?.();
  stopView = null;
  const { parts, query } = parseHash(location.hash);
  const [view, a, b] = parts;
  // Each view draws into its own element: a slow render that ends after the user moved
  // on draws into an element no longer on the page.
  const root = h("div", { class: `view view-${view ?? "plans"}` }, "loading…");
  replace(content, root);
  document.querySelectorAll("header nav a").forEach((el) => el.classList.toggle("active", el.getAttribute("href")?.split("/")[1] === view));
  try {
    switch (view) {
      case "run": return await renderRun(root, a ?? "", query);
      case "compare": return await renderCompare(root, a ?? "", b ?? "", query);
      case "live": stopView = renderLive(root); return;
      case "plans": case undefined: return await renderPlans(root, a);
      default: replace(root, errorBox(new Error(`no view at ${location.hash}`)));
    }
  } catch (e) {
    replace(root, errorBox(e));
  }
}

document.body.append(header(), content);
window.addEventListener("hashchange", () => void render());
void render();
