// The metric chart's option: a lone point is drawn as a mark, and lines of the same name from
// two runs stay two series.
import assert from "node:assert/strict";
import { test } from "node:test";
import { chartOption } from "../src/charts.js";

test("a lone point shows its mark; two runs' lines of one name stay apart", () => {
  const option = chartOption([
    { name: "train · loss", id: "run-a", job: 0, points: [[0, 1], [1, 0.5]] },
    { name: "train · loss", id: "run-b", job: 1, points: [[7, 0.4]] },
  ]);
  const [a, b] = option.series;
  assert.equal(a.showSymbol, false);
  assert.equal(b.showSymbol, true);
  assert.notEqual(a.id, b.id);
});
