// Layered layout of a plan's DAG: a node's layer is its dependency depth (0 for a node
// without inputs, else one more than its deepest input), so every edge points to a
// later layer. An edge that spans several layers passes through a waypoint in each layer
// between, which takes a slot there like a node: the edge then never runs through a
// node's box. Within a layer, slots are ordered by the mean slot of their inputs (one
// barycentre pass), which keeps the demo plans free of crossings. Pure: no DOM.

export interface LayoutNode {
  id: string;
  inputs: string[];
}

export interface Slot {
  layer: number;
  row: number;
}

export interface Layout {
  nodes: Map<string, Slot>;
  /** Per edge, the slots of its waypoints from its input to its node (often none). */
  edges: { from: string; to: string; via: Slot[] }[];
  /** The number of slots of each layer. */
  widths: number[];
}

/** Each node's depth. REQUIRES: the graph is acyclic with known inputs (rankd checked it at load). */
export function depths(nodes: LayoutNode[]): Map<string, number> {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const depth = new Map<string, number>();
  const visit = (id: string, guard: number): number => {
    const known = depth.get(id);
    if (known !== undefined) return known;
    const node = byId.get(id);
    // An unknown input or a cycle (never in a loaded plan) gets layer 0 rather than looping.
    if (!node || guard > nodes.length) return 0;
    let d = 0;
    for (const input of node.inputs) d = Math.max(d, visit(input, guard + 1) + 1);
    depth.set(id, d);
    return d;
  };
  for (const n of nodes) visit(n.id, 0);
  return depth;
}

export function layout(nodes: LayoutNode[]): Layout {
  const depth = depths(nodes);
  const known = new Set(nodes.map((n) => n.id));
  // Slots per layer, in plan order; a waypoint's id is "\0from\0to\0layer" (no node id
  // holds a NUL), its input the slot above it on its edge.
  const layers: { id: string; inputs: string[] }[][] = [];
  const put = (layer: number, id: string, inputs: string[]): void => void (layers[layer] ??= []).push({ id, inputs });
  const edges: { from: string; to: string; via: string[] }[] = [];
  for (const n of nodes) {
    const d = depth.get(n.id) ?? 0;
    const inputs: string[] = [];
    for (const from of n.inputs.filter((i) => known.has(i))) {
      const via: string[] = [];
      let above = from;
      for (let l = (depth.get(from) ?? 0) + 1; l < d; l++) {
        const id = `\0${from}\0${n.id}\0${l}`;
        put(l, id, [above]);
        via.push(id);
        above = id;
      }
      inputs.push(above);
      edges.push({ from, to: n.id, via });
    }
    put(d, n.id, inputs);
  }
  const slot = new Map<string, Slot>();
  layers.forEach((layer, l) => {
    const mean = (inputs: string[]): number => {
      const rows = inputs.map((i) => slot.get(i)?.row).filter((r): r is number => r !== undefined);
      return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : 0;
    };
    // A stable sort: slots with equal means keep plan order.
    const ordered = layer.map((s, i) => ({ s, i, m: mean(s.inputs) })).sort((a, b) => a.m - b.m || a.i - b.i);
    ordered.forEach(({ s }, row) => slot.set(s.id, { layer: l, row }));
  });
  return {
    nodes: new Map(nodes.map((n) => [n.id, slot.get(n.id)!])),
    edges: edges.map((e) => ({ from: e.from, to: e.to, via: e.via.map((id) => slot.get(id)!) })),
    widths: layers.map((l) => l?.length ?? 0),
  };
}
