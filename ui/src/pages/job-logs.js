// The job page's log: the last lines, then new ones as they come (server-sent events), for
// all learners or one; searchable; paused and resumed without losing a line.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, path, query, saveBlob } from "../api.js";
import { DownloadLink, ErrorNote } from "../components.js";
import { count } from "../format.js";
import { html } from "../html.js";
import { openStream } from "../sse.js";

const KEEP = 5000; // lines kept in the page; "Download logs" has every one
const FIRST = 1000; // lines shown from before the page opened
const FLUSH_MS = 200;
const PAGE = 10_000;

function Highlighted({ text, term }) {
  if (!term) return text;
  const parts = [];
  const lower = text.toLowerCase();
  let at = 0;
  for (let i = lower.indexOf(term); i >= 0; i = lower.indexOf(term, at)) {
    parts.push(text.slice(at, i), html`<mark>${text.slice(i, i + term.length)}</mark>`);
    at = i + term.length;
  }
  parts.push(text.slice(at));
  return parts;
}

/** Every stored line, page by page (keyset on the line id), as one text file. */
async function allLines(jobId, learner, prefix) {
  const text = [];
  let after = 0;
  for (;;) {
    const params = query({ pagesize: PAGE, after, learner });
    const { lines } = await api(`/v1/jobs/${path(jobId)}/logs${params}`);
    for (const line of lines) text.push(prefix ? `[learner ${line.learner}] ${line.line}` : line.line);
    if (lines.length < PAGE) return new Blob([text.join("\n"), "\n"], { type: "text/plain" });
    after = lines[lines.length - 1].id;
  }
}

const STREAM_NOTE = {
  open: "Streaming.",
  retrying: "Connection lost; reconnecting…",
  ended: "The job has ended: the log is complete.",
  paused: "Paused.",
  connecting: "Connecting…",
};

export function Logs({ job, onState, generation }) {
  const [lines, setLines] = useState([]);
  const [learner, setLearner] = useState("");
  const [paused, setPaused] = useState(false);
  const [follow, setFollow] = useState(true);
  const [search, setSearch] = useState("");
  const [status, setStatus] = useState("connecting");
  const [error, setError] = useState(null);
  const box = useRef(null);
  // Where to resume: the stream's last event id, for the learner filter it had.
  const resumeFrom = useRef({ learner, id: "" });
  const told = useRef(onState);
  told.current = onState;

  useEffect(() => {
    if (paused) return undefined;
    if (resumeFrom.current.learner !== learner) {
      setLines([]); // a new learner filter starts over
      resumeFrom.current = { learner, id: "" };
    }
    let buffer = [];
    let timer = null;
    const flush = () => {
      timer = null;
      const fresh = buffer;
      buffer = [];
      setLines((old) => {
        const joined = old.concat(fresh);
        return joined.length > KEEP ? joined.slice(joined.length - KEEP) : joined;
      });
    };
    const params = query({ follow: "true", states: "true", pos: -1, pagesize: FIRST, learner });
    const stream = openStream(`/v1/jobs/${path(job.id)}/logs${params}`, {
      lastEventId: resumeFrom.current.id,
      onEvent: (type, data) => {
        const parsed = JSON.parse(data);
        if (type === "line") {
          buffer.push(parsed);
          timer ||= setTimeout(flush, FLUSH_MS);
        } else if (type === "state" || type === "end") {
          told.current(parsed.state, parsed.message ?? "", type === "end");
        }
      },
      onState: (state, detail) => {
        setStatus(state === "failed" ? "ended" : state);
        setError(state === "failed" ? detail : null);
      },
    });
    return () => {
      resumeFrom.current = { learner, id: stream.lastEventId };
      clearTimeout(timer);
      if (buffer.length) flush();
      stream.close();
    };
  }, [job.id, learner, paused, generation]);

  const term = search.trim().toLowerCase();
  const shown = term ? lines.filter((line) => line.line.toLowerCase().includes(term)) : lines;

  useLayoutEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [shown.length, follow]);

  const several = job.learners > 1;
  const ended = status === "ended";
  return html`<section>
    <h2>Logs</h2>
    <div class="toolbar">
      <label class="check"><input type="checkbox" checked=${follow} onChange=${(e) => setFollow(e.currentTarget.checked)} /> Follow</label>
      <button type="button" onClick=${() => setPaused(!paused)} disabled=${ended && !paused}>
        ${paused ? "Resume stream" : "Pause"}
      </button>
      <div class="field">
        <label for="log-search">Search logs</label>
        <input id="log-search" type="search" value=${search} onInput=${(e) => setSearch(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="log-learner">Learner</label>
        <select id="log-learner" value=${learner} onChange=${(e) => setLearner(e.currentTarget.value)}>
          <option value="">All</option>
          ${Array.from({ length: job.learners }, (_, i) => html`<option value=${String(i + 1)}>${i + 1}</option>`)}
        </select>
      </div>
      <${DownloadLink}
        href=${`/v1/jobs/${path(job.id)}/logs${query({ pagesize: PAGE, learner })}`}
        fetchBlob=${async () => saveBlob(await allLines(job.id, learner, several && !learner), `${job.id}-logs.txt`)}
      >Download logs<//>
    </div>
    <p class="muted log-note">
      ${paused ? STREAM_NOTE.paused : STREAM_NOTE[status]}
      ${term
        ? ` ${count(shown.length)} of ${count(lines.length)} lines match.`
        : ` ${count(lines.length)} lines${lines.length >= KEEP ? ` (the newest ${count(KEEP)}; Download logs has them all)` : ""}.`}
    </p>
    <${ErrorNote} error=${error} />
    <div class="log" role="log" aria-live="off" aria-label="Log lines" tabindex="0" ref=${box}>
      ${shown.length === 0 && html`<p class="muted">${term ? "No line matches." : "No log lines yet."}</p>`}
      ${shown.map(
        (line) => html`<div class=${`line${line.stream === "stderr" ? " stderr" : ""}`} key=${line.id}>${several &&
          html`<span class="learner"><span class="sr-only">learner </span>${line.learner}</span>`}<${Highlighted} text=${line.line} term=${term} /></div>`,
      )}
    </div>
  </section>`;
}
