// A pipeline's steps laid out as a layered graph: each step in the column of its depth (the
// longest chain of steps it waits for), the steps of a column ordered to keep edges short, and
// each dependency a curve from the right side of one box to the left side of the next.
// Plain data in, plain data out: the page draws it as SVG.
import { STEP_ENDED } from "./states.js";

export const BOX = { width: 190, height: 78, gapX: 56, gapY: 18, margin: 8 };

/**
 * Each step's depth from its `after` list: roots are 0, a step is one more than the deepest
 * step it waits for. Names it waits for that are not steps are ignored; a cycle (which the
 * server refuses) cannot loop: a step met again on its own chain counts as a root.
 * An exit handler with nothing to wait for runs last, so it goes one column past the rest.
 */
export function depths(steps) {
  const byName = new Map(steps.map((s) => [s.name, s]));
  const depth = new Map();
  const visiting = new Set();
  const of = (name) => {
    if (depth.has(name)) return depth.get(name);
    if (visiting.has(name)) return -1;
    visiting.add(name);
    const needs = (byName.get(name).after || []).filter((n) => byName.has(n));
    const found = 1 + Math.max(-1, ...needs.map(of));
    visiting.delete(name);
    depth.set(name, found);
    return found;
  };
  for (const step of steps) of(step.name);
  const handlers = steps.filter((s) => s.exit_handler && !(s.after || []).some((n) => byName.has(n)));
  if (handlers.length) {
    const last = Math.max(0, ...steps.filter((s) => !handlers.includes(s)).map((s) => depth.get(s.name)));
    for (const s of handlers) depth.set(s.name, steps.length > handlers.length ? last + 1 : 0);
  }
  return depth;
}

/** The mean row of the steps `names` in `rows` (null when none has one). */
function centre(names, rows) {
  const found = names.map((n) => rows.get(n)).filter((r) => r !== undefined);
  return found.length ? found.reduce((a, b) => a + b, 0) / found.length : null;
}

/**
 * The layout: { nodes: [{ name, depth, row, x, y, width, height }], edges: [{ from, to, d }],
 * width, height }. Within a column, steps are first in the spec's order, then sorted by the mean
 * row of their parents (and, sweeping back, of their children): fewer crossings.
 */
export function layout(steps, box = BOX) {
  const depth = depths(steps);
  const columns = [];
  for (const step of steps) (columns[depth.get(step.name)] ||= []).push(step.name);
  for (let i = 0; i < columns.length; i++) columns[i] ||= [];
  const parents = new Map(steps.map((s) => [s.name, (s.after || []).filter((n) => depth.has(n))]));
  const children = new Map(steps.map((s) => [s.name, []]));
  for (const [name, ps] of parents) for (const p of ps) children.get(p).push(name);

  const rows = new Map();
  const number = () => columns.forEach((col) => col.forEach((name, i) => rows.set(name, i)));
  number();
  const sortBy = (col, links) => {
    const keyed = col.map((name, i) => [name, centre(links.get(name), rows) ?? i, i]);
    keyed.sort((a, b) => a[1] - b[1] || a[2] - b[2]);
    return keyed.map(([name]) => name);
  };
  for (let sweep = 0; sweep < 2; sweep++) {
    for (let c = 1; c < columns.length; c++) {
      columns[c] = sortBy(columns[c], parents);
      number();
    }
    for (let c = columns.length - 2; c >= 0; c--) {
      columns[c] = sortBy(columns[c], children);
      number();
    }
  }

  const tallest = Math.max(1, ...columns.map((col) => col.length));
  const step = box.height + box.gapY;
  const nodes = [];
  const at = new Map();
  columns.forEach((col, c) => {
    const offset = ((tallest - col.length) * step) / 2; // a short column is centred
    col.forEach((name, r) => {
      const node = {
        name,
        depth: c,
        row: r,
        x: box.margin + c * (box.width + box.gapX),
        y: box.margin + offset + r * step,
        width: box.width,
        height: box.height,
      };
      nodes.push(node);
      at.set(name, node);
    });
  });
  const edges = [];
  for (const s of steps) {
    for (const p of parents.get(s.name)) {
      const a = at.get(p);
      const b = at.get(s.name);
      const x1 = a.x + a.width;
      const y1 = a.y + a.height / 2;
      const x2 = b.x;
      const y2 = b.y + b.height / 2;
      const bend = Math.max(box.gapX / 2, (x2 - x1) / 2);
      edges.push({ from: p, to: s.name, d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}` });
    }
  }
  const width = box.margin * 2 + columns.length * box.width + Math.max(0, columns.length - 1) * box.gapX;
  const height = box.margin * 2 + tallest * box.height + (tallest - 1) * box.gapY;
  return { nodes, edges, width, height };
}

/** A fan-out step's items: how many ended, how many run, of how many. */
export function progress(tasks) {
  return {
    done: tasks.filter((t) => STEP_ENDED.has(t.state)).length,
    running: tasks.filter((t) => t.state === "RUNNING").length,
    total: tasks.length,
  };
}

/** Cuts `text` to `max` characters with an ellipsis (SVG text does not wrap). */
export function clip(text, max) {
  const s = String(text ?? "");
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
