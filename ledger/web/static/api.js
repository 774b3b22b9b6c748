// Calls the ledger's API with the session cookie (same authorization as every other client).
// Unsafe methods send the session's CSRF token; the token itself never reaches this page.
let csrf = "";

export function setCsrf(token) { csrf = token || ""; }

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || ("HTTP " + status));
    this.status = status;
    this.body = body || {};
  }
}

export async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-CSRF-Token"] = csrf;
  const response = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (response.status === 401) {
    window.dispatchEvent(new CustomEvent("waggle:signed-out"));
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// A route the ledger does not serve answers 404 "Route GET:/path not found" (unlike the
// permission 404 {"error": "not found"}), or 405 when the path exists for another method.
export function isMissingRoute(error) {
  return error instanceof ApiError && ((error.status === 404 && /^Route /.test(error.message)) || error.status === 405);
}
