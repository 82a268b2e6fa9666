// The shapes of rankd's answers the console reads (docs/api.md, docs/plan.md,
// docs/experiments.md, docs/data.md). Only the fields used here; the server may send more.

export interface PlanSummary {
  name: string;
  description: string;
  params: Record<string, { type: string }>;
  nodes: number;
}

export interface ParamDecl {
  type: string; // i64, f64, str, bool
  default?: unknown;
  min?: number;
  max?: number;
}

export interface PlanNode {
  node_id: string;
  op: string;
  inputs: string[];
  params: Record<string, unknown>;
  optional?: boolean;
  timeout_ms?: number;
}

export interface PlanFile {
  name: string;
  description?: string;
  params: Record<string, ParamDecl>;
  nodes: PlanNode[];
  output: { node: string; columns?: string[] };
  models?: { name: string; sha256: string }[];
}

export interface Family {
  type: string;
  key: string;
  id?: string;
  members?: string;
  fields?: Record<string, string>;
}

export interface SchemaAnswer {
  sha256: string;
  builtin: boolean;
  schema: { families: Record<string, Family> };
}

export interface Variant {
  name: string;
  plan: string;
  params: Record<string, unknown>;
  weight: number;
}

export interface Experiment {
  name: string;
  plan: string;
  salt: string;
  variants: Variant[];
  shadow?: { plan: string; percent: number; compare_top?: number }[];
  start_ms?: number;
  end_ms?: number;
}

export interface ExperimentsFile {
  experiments: Experiment[];
}

export type UserId = number | string;

export interface RankRequest {
  plan: string;
  user_id: UserId;
  params?: Record<string, unknown>;
  explain?: boolean;
}

export interface NodeTiming {
  node_id: string;
  op: string;
  status: string; // ok, failed, timeout, skipped
  rows: number;
  rows_in?: number;
  start_us: number;
  took_us: number;
  model?: string;
  cache_hits?: number;
  cache_misses?: number;
}

export type Item = Record<string, unknown>;

export interface RankResponse {
  plan: string;
  user_id: UserId;
  items: Item[];
  count: number;
  took_us: number;
  degraded: string[];
  nodes?: NodeTiming[];
  experiment?: string;
  variant?: string;
}

export interface PlanMetrics {
  requests: number;
  errors: number;
  outcomes: Record<string, number>;
  duration_ms: { le: number[]; counts: number[] };
}

/** POST /events' events since start, every type, summed over shards. */
export interface EventMetrics {
  accepted: number;
  failed: number;
}

export interface MetricsSnapshot {
  plans: Record<string, PlanMetrics>;
  events?: EventMetrics; // absent from a rankd older than the events
  now_ms: number;
}
