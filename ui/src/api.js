// The API, same origin, signed in by a session cookie: the token is given once, to
// POST /v1/session, which keeps it in an HttpOnly, SameSite=Strict cookie that no script of the
// page can read; every call then carries the UI's own header, without which the server ignores
// the cookie (another site's page cannot add it). A 401 anywhere signs the user out (the token
// was revoked or expired); every other error is an ApiError carrying the server's
// `{"error", "field", "code"}`.

const SIGNED_IN = "loom.signed-in"; // whether a session was opened: no secret in storage
const ME = "loom.me"; // the last `GET /v1/me` answer for this session: the page starts at once
const UI_HEADER = "X-Loom-UI";

export const token = {
  get: () => localStorage.getItem(SIGNED_IN) === "1",
  set: () => {
    localStorage.setItem(SIGNED_IN, "1");
    localStorage.removeItem(ME);
  },
  clear: () => {
    localStorage.removeItem(SIGNED_IN);
    localStorage.removeItem(ME);
    fetch("/v1/session", { method: "DELETE", headers: { [UI_HEADER]: "1" } }).catch(() => {});
  },
};

/** Who the token's user was when last asked (the server still decides every call). */
export const me = {
  get: () => {
    try {
      return token.get() ? JSON.parse(localStorage.getItem(ME) || "null") : null;
    } catch {
      return null;
    }
  },
  set: (user) => localStorage.setItem(ME, JSON.stringify(user)),
};

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error || `the server answered ${status}`);
    this.status = status;
    this.field = body?.field || "";
    this.code = body?.code || "";
  }
}

let signedOut = () => {};

/** What to do when the server refuses the token (401). */
export function onSignedOut(handler) {
  signedOut = handler;
}

/** The token was refused: sign out. */
export function refused(error) {
  signedOut(error);
}

/** A token given (signing in) goes as `Authorization`; else the session cookie goes, with the
 * header that lets the server take it. */
export function authHeaders(given, extra = {}) {
  return given ? { Authorization: `Bearer ${given}`, ...extra } : { [UI_HEADER]: "1", ...extra };
}

export async function errorBody(response) {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return { error: text.slice(0, 300) || response.statusText };
  }
}

/** The raw response of a call; throws ApiError unless it is 2xx. */
export async function request(path, { method = "GET", json, body, signal, headers, bearer } = {}) {
  const sent = authHeaders(bearer, headers);
  if (json !== undefined) {
    sent["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  }
  const response = await fetch(path, { method, body, signal, headers: sent });
  if (response.ok) return response;
  const error = new ApiError(response.status, await errorBody(response));
  if (response.status === 401 && bearer === undefined) signedOut(error);
  throw error;
}

/** A call's JSON answer (null for 204). */
export async function api(path, options) {
  const response = await request(path, options);
  return response.status === 204 ? null : response.json();
}

/** `?a=1&b=2` from an object, leaving out empty values. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === "" || value === false) continue;
    for (const each of Array.isArray(value) ? value : [value]) search.append(key, String(each));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export const path = (...parts) => parts.map((p) => encodeURIComponent(p)).join("/");

/** Hand a Blob to the browser as a download named `filename`. */
export function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function filenameOf(response, fallback) {
  const header = response.headers.get("content-disposition") || "";
  const star = /filename\*=(?:UTF-8'')?([^;]+)/i.exec(header);
  if (star) return decodeURIComponent(star[1].replace(/"/g, ""));
  const plain = /filename="?([^";]+)"?/i.exec(header);
  return plain ? plain[1] : fallback;
}

/** Download an API file with the token (a plain link cannot send it). */
export async function download(url, fallback) {
  const response = await request(url);
  saveBlob(await response.blob(), filenameOf(response, fallback));
}
