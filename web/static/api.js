// The seckill-go HTTP API as the page uses it. Every answer's Date header feeds the server clock
// estimate; every failure becomes an ApiError with the API's stable error code ("network" when
// there was no answer at all).

import { observeServerDate } from './clock.js';

/**
 * ApiError is a refused or failed call: status 0 and code "network" when nothing answered.
 * retryAfterMs is the answer's Retry-After in ms (a 429, a 503), 0 when it gave none.
 */
export class ApiError extends Error {
  constructor(status, code, message, retryAfterMs = 0) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.retryAfterMs = retryAfterMs;
  }
}

// retryAfterMs reads a Retry-After header: seconds, or an HTTP date; 0 when absent or unreadable.
function retryAfterMs(header) {
  if (!header) return 0;
  const secs = Number(header);
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? 0 : Math.max(0, at - Date.now());
}

// cache is the fetch cache mode: "no-store" but for the public reads, which the browser may keep
// and revalidates every time ("no-cache": a 304 when they have not changed).
async function call(path, { method = 'GET', body, headers = {}, token, timeoutMs = 15000, cache = 'no-store' } = {}) {
  const h = { Accept: 'application/json', ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  if (token) h.Authorization = `Bearer ${token}`;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  const sentAt = Date.now();
  let res;
  let text = '';
  try {
    res = await fetch(path, {
      method,
      headers: h,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: abort.signal,
      cache,
      credentials: 'omit',
    });
    text = await res.text();
  } catch {
    throw new ApiError(0, 'network', 'the server could not be reached');
  } finally {
    clearTimeout(timer);
  }
  observeServerDate(res.headers.get('Date'), sentAt, Date.now());
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const e = data && typeof data.error === 'object' && data.error ? data.error : {};
    throw new ApiError(res.status, typeof e.code === 'string' ? e.code : `http_${res.status}`,
      typeof e.message === 'string' ? e.message : res.statusText, retryAfterMs(res.headers.get('Retry-After')));
  }
  return data;
}

const enc = encodeURIComponent;

/** products lists every sale, each with its viewer figures (stats: stock, sold_units, the live rates). */
export const products = () => call('/api/v1/products', { cache: 'no-cache' }).then((d) => d.products);

/** strategies lists the stock strategies, in catalog order, each with whether this server serves it. */
export const strategies = () => call('/api/v1/strategies').then((d) => d.strategies);

/**
 * adminStats returns a product's exact audit (admin): the public figures and reserved,
 * confirmed_units, orders_confirmed, oversold and the units by order state, read from MySQL.
 */
export const adminStats = (token, id) => call(`/api/v1/admin/products/${enc(id)}/stats`, { token });

/** health asks the server whether it is up: the cheapest answer, read for its Date header. */
export const health = () => call('/healthz');

/**
 * purchase buys one unit as user; key is the Idempotency-Key (reuse it to retry safely); token,
 * if any, is the buyer's token, for a shop that verifies its buyers; pass, if any, is the
 * admission pass the sale's waiting room gave the buyer (sent as the Admission-Pass header).
 */
export const purchase = (id, user, key, token, pass) => call(`/api/v1/products/${enc(id)}/purchase`, {
  method: 'POST',
  body: { user_id: user, quantity: 1 },
  headers: pass ? { 'Idempotency-Key': key, 'Admission-Pass': pass } : { 'Idempotency-Key': key },
  token,
});

/**
 * joinQueue puts user in a waiting-room sale's line, or finds them there (idempotent per buyer
 * while the ticket lives), and returns the ticket: {sale, state ("pre_queue", "waiting",
 * "admitted", "sold_out", "abandoned", "session_over", "not_joined"), ticket, ahead, eta_seconds
 * (or null), opens_at, poll_after_ms, and once admitted pass and pass_expires_at}.
 */
export const joinQueue = (id, user, token) => call(`/api/v1/products/${enc(id)}/queue`, {
  method: 'POST',
  body: { user_id: user },
  token,
});

/** queueTicket returns user's ticket in a waiting-room sale's line (the heartbeat that keeps its place). */
export const queueTicket = (id, user, token) => call(`/api/v1/products/${enc(id)}/queue?user_id=${enc(user)}`, { token });

/**
 * order returns user's accepted purchase: status "queued", "confirmed" (awaiting payment until
 * expires_at), "paying", "paid", "expired", "cancelled" or "refused" (accepted, then refused when
 * it was recorded: final, with a "message"). A server without the payment window
 * answers "queued" or "confirmed" with no expires_at. An order is its buyer's alone: asked as
 * anyone else (user, or the token's subject where the shop verifies buyers), it is not_found.
 */
export const order = (orderID, user, token) => call(`/api/v1/orders/${enc(orderID)}?user_id=${enc(user)}`, { token });

/**
 * pay pays a confirmed order as its buyer; key is the Idempotency-Key of this payment attempt:
 * reuse it to retry an unanswered one (it can never charge twice), a new one after a decline.
 */
export const pay = (orderID, user, key, token) => call(`/api/v1/orders/${enc(orderID)}/pay`, {
  method: 'POST',
  body: { user_id: user },
  headers: { 'Idempotency-Key': key },
  token,
});

/** cancelOrder gives a confirmed, unpaid order up: its unit goes back on sale. */
export const cancelOrder = (orderID, user, token) => call(`/api/v1/orders/${enc(orderID)}/cancel`, {
  method: 'POST',
  body: { user_id: user },
  token,
});

/** resetProduct restocks a product (admin). */
export const resetProduct = (token, id, stock, strategy) => call(`/api/v1/admin/products/${enc(id)}/reset`, {
  method: 'POST', token, body: { stock, strategy },
});

/** startStampede runs the server's load burst on a product (admin). */
export const startStampede = (token, id, buyers, strategy, stock) => call(`/api/v1/admin/products/${enc(id)}/stampede`, {
  method: 'POST', token, body: { buyers, strategy, stock },
});

/** stampede returns a stampede's progress (admin). */
export const stampede = (token, stampedeID) => call(`/api/v1/admin/stampedes/${enc(stampedeID)}`, { token });

/** newIdempotencyKey returns a random key; crypto.getRandomValues works outside secure contexts too. */
export function newIdempotencyKey() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return `web-${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}
