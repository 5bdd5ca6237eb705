// Small hooks the pages share: polling, timers, debounced values, loading a resource.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { openStream } from "./sse.js";

/** Calls `fn` every `ms` while `active` (and the tab is visible). */
export function useInterval(fn, ms, active = true) {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    if (!active || !ms) return undefined;
    const timer = setInterval(() => {
      if (document.visibilityState !== "hidden") saved.current();
    }, ms);
    return () => clearInterval(timer);
  }, [ms, active]);
}

export function useDebounced(value, ms) {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}

/** Re-renders every `ms`: for durations that grow while a job runs. */
export function useNow(ms, active = true) {
  const [now, setNow] = useState(Date.now());
  useInterval(() => setNow(Date.now()), ms, active);
  return now;
}

/**
 * Loads `load(signal)` when `deps` change; `reload()` loads again quietly (the old data stays
 * shown until the new arrives). Returns { data, error, loading, reload }.
 */
export function useResource(load, deps) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const current = useRef(null);
  const run = useCallback(async () => {
    current.current?.abort();
    const controller = new AbortController();
    current.current = controller;
    try {
      const data = await load(controller.signal);
      if (!controller.signal.aborted) setState({ data, error: null, loading: false });
    } catch (error) {
      if (!controller.signal.aborted) setState((s) => ({ ...s, error, loading: false }));
    }
  }, deps);
  useEffect(() => {
    setState({ data: null, error: null, loading: true });
    run();
    return () => current.current?.abort();
  }, [run]);
  return { ...state, reload: run };
}

/** The tab's title: "<what> · Loom". */
export function useTitle(what) {
  useEffect(() => {
    document.title = what ? `${what} · Loom` : "Loom";
  }, [what]);
}

/** Calls `fn` once `ms` after the last of a burst of calls to the returned function. */
export function useDebouncedCall(fn, ms) {
  const saved = useRef(fn);
  saved.current = fn;
  const timer = useRef(null);
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(() => saved.current(), ms);
  }, [ms]);
}

/** Calls `reload` (once per burst) whenever one of the user's jobs (everyone's: `all`) changes
 * state, from the API's event stream. */
export function useJobEvents(reload, all) {
  const refresh = useDebouncedCall(reload, 400);
  useEffect(() => {
    const stream = openStream(`/v1/events${all ? "?all=true" : ""}`, {
      onEvent: (type) => type === "job" && refresh(),
    });
    return () => stream.close();
  }, [all]);
}
