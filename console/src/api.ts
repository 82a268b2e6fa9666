// Calls to rankd's API on the address that served the page (the metrics listener with
// --console; docs/api.md). Every call carries the token typed into the page, when one is
// set. Called from the page's one thread.

import type { ExperimentsFile, MetricsSnapshot, PlanFile, PlanSummary, RankRequest, RankResponse, SchemaAnswer } from "./types.js";

const TOKEN_KEY = "rankd-console-token";

/** The token of this browser tab (sessionStorage: gone when the tab closes). */
export function getToken(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? "";
}

export function setToken(token: string): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** An answer other than 2xx: the HTTP status and rankd's error body, when it had one. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }

  /** What the page shows: a 401 says that a token is needed. */
  describe(): string {
    const head = this.status === 401 ? "token required" : `HTTP ${this.status}`;
    return this.code ? `${head}: ${this.code}: ${this.message}` : `${head}: ${this.message}`;
  }
}

// The paths are relative to the page (/console/), and the API lives at the root of the
// same listener: "../rank" from /console/ is /rank.
const ROOT = new URL("../", document.baseURI);

async function call<T>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<T> {
  const h: Record<string, string> = { ...headers };
  const token = getToken();
  if (token) h["Authorization"] = `Bearer ${token}`;
  if (body !== undefined) h["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(new URL(path, ROOT), { method, headers: h, body: body === undefined ? null : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, "network", `rankd did not answer (${String(e)})`);
  }
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON: reported below as it is, cut.
  }
  if (!res.ok) {
    const err = (parsed as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
    if (err && typeof err.code === "string" && typeof err.message === "string") {
      throw new ApiError(res.status, err.code, err.message);
    }
    throw new ApiError(res.status, "", text.slice(0, 300) || res.statusText);
  }
  if (parsed === undefined) throw new ApiError(res.status, "", `${path} answered no JSON`);
  return parsed as T;
}

export const api = {
  plans: () => call<{ plans: PlanSummary[] }>("GET", "plans").then((r) => r.plans),
  plan: (name: string) => call<PlanFile>("GET", `plans/${encodeURIComponent(name)}`),
  schema: () => call<SchemaAnswer>("GET", "schema"),
  experiments: () => call<ExperimentsFile>("GET", "experiments").then((r) => r.experiments),
  metrics: () => call<MetricsSnapshot>("GET", "console/api/metrics"),
  /** `forceVariant`: "<experiment>=<variant>" (honoured with --allow-forced-variants). */
  rank: (req: RankRequest, forceVariant?: string) =>
    call<RankResponse>("POST", "rank", req, forceVariant ? { "X-Rankd-Variant": forceVariant } : undefined),
};
