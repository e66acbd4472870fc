// Client of the coordinator's HTTP API (schema/http_api.md). The token the user pasted
// (kept in localStorage under kTokenKey) goes as a bearer token with every request: writes
// always need it, reads too when the coordinator listens beyond loopback. It is mirrored
// in the cookie kTokenCookie for the live stream (EventSource cannot set headers); the
// coordinator accepts that cookie for reads only.

const kTokenKey = 'headlab.token';
const kTokenCookie = 'headlab_token';
const kBase = '/api/v1';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function getToken() {
  if (typeof localStorage === 'undefined') return '';  // node --test without a fake
  return localStorage.getItem(kTokenKey) || '';
}

// Sets the cookie the live stream carries (a no-op outside a browser).
function setTokenCookie(token) {
  if (typeof document === 'undefined') return;
  const value = token ? encodeURIComponent(token) : '';
  document.cookie = `${kTokenCookie}=${value}; path=/; SameSite=Strict${token ? '' : '; max-age=0'}`;
}

export function setToken(token) {
  if (token) localStorage.setItem(kTokenKey, token);
  else localStorage.removeItem(kTokenKey);
  setTokenCookie(token);
}

// Called once at start-up: a token saved earlier reaches the live stream's cookie too.
export function restoreToken() {
  setTokenCookie(getToken());
}

async function request(method, path, body, signal) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  // The query endpoint is read-only; every other POST is a write.
  const isWrite = method !== 'GET' && path !== '/query';
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  let res;
  try {
    res = await fetch(kBase + path, {
      method, headers, signal,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, `coordinator unreachable: ${e.message}`);
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (res.ok) return data;
  const detail = (data && data.error) || text || res.statusText;
  if (isWrite && res.status === 401) throw new ApiError(401, 'refused: write token required');
  if (isWrite && res.status === 403) throw new ApiError(403, `refused: token rejected (${detail})`);
  if (!isWrite && res.status === 401) {
    throw new ApiError(401, token ? 'refused: the token is not valid for reads on this coordinator'
      : 'refused: this coordinator needs a token for reads (paste it in the token box above)');
  }
  throw new ApiError(res.status, `${res.status}: ${detail}`);
}

export const get = (path, signal) => request('GET', path, undefined, signal);
export const post = (path, body = {}) => request('POST', path, body);

// Runs a read-only SELECT through POST /query; returns an array of row objects.
export async function query(sql, signal) {
  const r = await request('POST', '/query', { sql }, signal);
  const cols = r.columns || [];
  return (r.rows || []).map((row) => Object.fromEntries(cols.map((c, i) => [c, row[i]])));
}

// Quotes a string as an SQL literal.
export function sqlString(s) {
  return `'${String(s).replaceAll("'", "''")}'`;
}

// Returns `v` as an integer safe to paste into SQL, or throws.
export function sqlInt(v) {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new ApiError(400, `not an integer id: ${v}`);
  return n;
}
