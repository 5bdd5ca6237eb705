// The event-stream parser: fields, comments, multi-line data, ids, and lines split anywhere.
import assert from "node:assert/strict";
import { test } from "node:test";
import { EventParser } from "../src/sse.js";

function parse(chunks) {
  const events = [];
  const parser = new EventParser((type, data, id) => {
    events.push({ type, data, id });
    return type === "end";
  });
  const stopped = chunks.map((chunk) => parser.push(chunk));
  return { events, parser, stopped };
}

test("events with ids, types, comments and multi-line data", () => {
  const { events, parser } = parse([
    ": listening\n\nid: 1.0\nevent: line\ndata: {\"a\":1}\n\n",
    "data: one\ndata: two\n\nretry: 5000\n\n",
  ]);
  assert.deepEqual(events, [
    { type: "line", data: '{"a":1}', id: "1.0" },
    { type: "message", data: "one\ntwo", id: "1.0" },
  ]);
  assert.equal(parser.retry, 5000);
});

test("a line split between chunks, CRLF endings, and a CR at a chunk's end", () => {
  const { events } = parse(["id: 7\r", "\nevent: st", "ate\r\ndata: x\r", "\n\r\n"]);
  assert.deepEqual(events, [{ type: "state", data: "x", id: "7" }]);
});

test("an end event stops the parser", () => {
  const { events, stopped } = parse(["event: end\ndata: {}\n\nevent: line\ndata: late\n\n"]);
  assert.deepEqual(events.map((e) => e.type), ["end"]);
  assert.deepEqual(stopped, [true]);
});
