// The critical path of a run: the chain of nodes whose end determines the run's end.
// It starts at the node that ended last and walks back through inputs, each time to the
// input that ended last (the one the node waited for). Shortening any node off this
// chain does not end the run sooner. Pure: no DOM.

export interface TimedNode {
  id: string;
  inputs: string[];
  start_us: number;
  took_us: number;
  status: string;
}

/** Node ids on the critical path, from the first to the last. */
export function criticalPath(nodes: TimedNode[]): string[] {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const end = (n: TimedNode): number => n.start_us + n.took_us;
  // A skipped node never ran: it does not hold up anything.
  const ran = nodes.filter((n) => n.status !== "skipped");
  if (ran.length === 0) return [];
  // On a tie (times are whole µs) the later node in plan order: a node placed after its
  // inputs that took under a µs still ended the run.
  let last = ran[0]!;
  for (const n of ran) if (end(n) >= end(last)) last = n;
  const path = [last.id];
  const seen = new Set(path);
  for (let cur: TimedNode | undefined = last; cur;) {
    let next: TimedNode | undefined;
    for (const id of cur.inputs) {
      const input = byId.get(id);
      if (!input || input.status === "skipped" || seen.has(id)) continue;
      if (!next || end(input) > end(next)) next = input;
    }
    if (next) {
      path.push(next.id);
      seen.add(next.id);
    }
    cur = next;
  }
  return path.reverse();
}
