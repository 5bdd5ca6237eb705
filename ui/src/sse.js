// Server-sent events over fetch(): EventSource cannot send the Authorization header.
// Parses the event-stream format (id:, event:, data:, retry:, comments), reconnects after a
// dropped connection with Last-Event-ID (so nothing is missed or repeated) and backs off
// while the server is away. Stops for good on an `end` event, a 4xx answer, or close().

import { ApiError, authHeaders, errorBody, refused } from "./api.js";

const MAX_WAIT_MS = 30_000;

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

/** Splits a byte stream into events; `dispatch(type, data, id)` returns true to stop. */
export class EventParser {
  constructor(dispatch) {
    this.dispatch = dispatch;
    this.lastId = "";
    this.retry = null;
    this.buffer = "";
    this.reset();
  }

  reset() {
    this.type = "";
    this.data = [];
  }

  /** Feed decoded text; returns true once dispatch asked to stop. */
  push(text, done = false) {
    this.buffer += text;
    let start = 0;
    for (;;) {
      const match = /\r\n|\r|\n/g;
      match.lastIndex = start;
      const found = match.exec(this.buffer);
      if (!found) break;
      // A lone \r at the very end may be the first half of \r\n: wait for the next chunk.
      if (found[0] === "\r" && found.index === this.buffer.length - 1 && !done) break;
      const line = this.buffer.slice(start, found.index);
      start = found.index + found[0].length;
      if (this.line(line)) {
        this.buffer = "";
        return true;
      }
    }
    this.buffer = this.buffer.slice(start);
    return false;
  }

  line(line) {
    if (line === "") return this.end();
    if (line.startsWith(":")) return false; // a comment: keep-alive
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.type = value;
    else if (field === "id" && !value.includes("\0")) this.lastId = value;
    else if (field === "retry" && /^\d+$/.test(value)) this.retry = Number(value);
    return false;
  }

  end() {
    const { type, data } = this;
    this.reset();
    if (data.length === 0) return false;
    return Boolean(this.dispatch(type || "message", data.join("\n"), this.lastId));
  }
}

/**
 * Follow `url`. `onEvent(type, data, id)` gets each event (data is the raw text);
 * `onState("open" | "retrying" | "ended" | "failed", detail)` tells where the stream is.
 * Returns { close(), lastEventId }.
 */
export function openStream(url, { onEvent, onState = () => {}, lastEventId = "", stopOn = ["end"] }) {
  const controller = new AbortController();
  const { signal } = controller;
  const parser = new EventParser((type, data, id) => {
    onEvent(type, data, id);
    return stopOn.includes(type);
  });
  parser.lastId = lastEventId;
  let failures = 0;

  async function readAll(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return parser.push(decoder.decode(), true);
      if (parser.push(decoder.decode(value, { stream: true }))) {
        reader.cancel().catch(() => {});
        return true;
      }
    }
  }

  async function run() {
    while (!signal.aborted) {
      try {
        const headers = authHeaders(undefined, { Accept: "text/event-stream" });
        if (parser.lastId) headers["Last-Event-ID"] = parser.lastId;
        const response = await fetch(url, { headers, signal, cache: "no-store" });
        if (!response.ok) {
          const error = new ApiError(response.status, await errorBody(response));
          if (response.status === 401) refused(error);
          const lasting = response.status >= 400 && response.status < 500 && response.status !== 429;
          if (lasting) return onState("failed", error);
          throw error;
        }
        failures = 0;
        onState("open");
        if (await readAll(response.body)) return onState("ended");
        parser.reset(); // a half-received event is dropped; the server sends it again
      } catch (error) {
        if (signal.aborted) return;
        failures += 1;
        onState("retrying", error);
      }
      const wait = Math.min((parser.retry ?? 1000) * 2 ** Math.min(failures, 5), MAX_WAIT_MS);
      await sleep(wait, signal);
    }
  }

  run();
  return {
    close: () => controller.abort(),
    get lastEventId() {
      return parser.lastId;
    },
  };
}
