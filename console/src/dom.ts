// Building DOM and SVG nodes. The only way the console puts anything on the page: every
// string becomes a text node or the value of an attribute named in SAFE_ATTRIBUTES, so
// text from the server (Redis data, plan names, error messages) is never parsed as HTML.
// Called from the page's one thread.

type Child = Node | string | number | null | undefined | false;
export type Attrs = Record<string, string | number | boolean | undefined>;

// Attributes that cannot run script or load anything whatever their value. `href` is
// allowed for in-page links only (checked in setSafeAttribute); event handlers (`on*`),
// `src`, `style` and `srcdoc` are never set.
const SAFE_ATTRIBUTES = new Set([
  "class", "id", "title", "for", "name", "type", "value", "placeholder", "rows", "cols",
  "disabled", "selected", "checked", "spellcheck", "autocomplete", "role", "colspan",
  "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "ry", "width", "height", "d",
  "points", "viewBox", "transform", "text-anchor", "dominant-baseline", "marker-end",
  "markerWidth", "markerHeight", "refX", "refY", "orient", "preserveAspectRatio",
]);

const SVG_NS = "http://www.w3.org/2000/svg";

function setSafeAttribute(node: Element, name: string, value: string): void {
  if (name === "href") {
    // Only hash routes of the console itself: never javascript: or another origin.
    if (!value.startsWith("#")) throw new Error(`refusing href ${JSON.stringify(value)}`);
  } else if (!SAFE_ATTRIBUTES.has(name) && !name.startsWith("data-") && !name.startsWith("aria-")) {
    throw new Error(`refusing attribute ${name}`);
  }
  node.setAttribute(name, value);
}

function fill(node: Element, attrs: Attrs | undefined, children: Child[]): void {
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === false) continue;
    setSafeAttribute(node, name, value === true ? "" : String(value));
  }
  append(node, ...children);
}

/** Appends children: strings and numbers as text nodes, falsy ones skipped. */
export function append(parent: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

/** An HTML element: `h("td", {class: "num"}, "3")`. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K, attrs?: Attrs, ...children: Child[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  fill(node, attrs, children);
  return node;
}

/** An SVG element, e.g. `s("rect", {x: 0, y: 0, width: 10, height: 4})`. */
export function s<K extends keyof SVGElementTagNameMap>(
  tag: K, attrs?: Attrs, ...children: Child[]): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  fill(node, attrs, children);
  return node;
}

/** Replaces everything inside `parent` with `children`. */
export function replace(parent: Node, ...children: Child[]): void {
  while (parent.firstChild) parent.removeChild(parent.firstChild);
  append(parent, ...children);
}

/** A link to a console address, e.g. link("#/plans/feed", "feed"). */
export function link(hash: string, ...children: Child[]): HTMLAnchorElement {
  return h("a", { href: hash }, ...children);
}

/** Cuts text to `max` characters with an ellipsis (the full text goes in a title). */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : text.slice(0, max - 1) + "…";
}
