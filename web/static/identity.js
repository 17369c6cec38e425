// The buyer's identity: a user id made up on the first visit and kept in localStorage, editable.
// Also remembers, per buyer, the orders this browser placed and the waiting-room lines it joined,
// so that a reload still shows them (and keeps the buyer's place: a join is idempotent per buyer),
// and the buyer token pasted in place of a name when the shop verifies its buyers (docs/api.md:
// buyer identity).

const BUYER_KEY = 'seckill.buyer';
const ORDERS_KEY = 'seckill.orders';
const QUEUES_KEY = 'seckill.queues';
const TOKEN_KEY = 'seckill.buyerToken';
const USER_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** validBuyer reports whether id is a user id the API accepts. */
export function validBuyer(id) {
  return USER_ID.test(id);
}

function storage(kind) {
  try {
    const s = window[kind];
    const probe = '__seckill_probe__';
    s.setItem(probe, probe);
    s.removeItem(probe);
    return s;
  } catch {
    return null; // storage disabled (private mode, policy): keep things in memory only
  }
}

const local = storage('localStorage');
const memory = new Map();

function read(key) {
  return local ? local.getItem(key) : memory.get(key) ?? null;
}

function write(key, value) {
  if (local) {
    try {
      local.setItem(key, value);
      return;
    } catch {
      // quota: fall through to memory
    }
  }
  memory.set(key, value);
}

function randomBuyer() {
  const alphabet = 'abcdefghijkmnpqrstuvwxyz23456789';
  const b = new Uint8Array(6);
  crypto.getRandomValues(b);
  return `buyer-${Array.from(b, (x) => alphabet[x % alphabet.length]).join('')}`;
}

/** currentBuyer returns the stored buyer id, making and storing one on the first visit. */
export function currentBuyer() {
  const stored = read(BUYER_KEY);
  if (stored && validBuyer(stored)) return stored;
  const id = randomBuyer();
  write(BUYER_KEY, id);
  return id;
}

/** setBuyer stores a new buyer id; it must be valid. */
export function setBuyer(id) {
  if (!validBuyer(id)) throw new Error('invalid buyer id');
  write(BUYER_KEY, id);
}

/**
 * tokenSubject returns the subject (the user id) of a JWT-shaped buyer token, or null. The page
 * does not verify the token, it cannot: the server does, and refuses a purchase with a bad one.
 */
export function tokenSubject(token) {
  const parts = String(token).split('.');
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]+$/.test(p))) return null;
  try {
    const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
    const claims = JSON.parse(atob(b64.padEnd(Math.ceil(b64.length / 4) * 4, '=')));
    return claims && typeof claims.sub === 'string' && validBuyer(claims.sub) ? claims.sub : null;
  } catch {
    return null;
  }
}

/** setBuyerToken stores a buyer token (its subject becomes the buyer); "" forgets it. */
export function setBuyerToken(token) {
  write(TOKEN_KEY, token);
}

/** tokenOf returns the stored buyer token if it is the buyer's, else "". */
export function tokenOf(buyer) {
  const token = read(TOKEN_KEY) || '';
  return token && tokenSubject(token) === buyer ? token : '';
}

/** ordersOf returns {productID: {orderID, status}} of the buyer's orders placed here. */
export function ordersOf(buyer) {
  const mine = readAll(ORDERS_KEY)[buyer];
  return mine && typeof mine === 'object' ? mine : {};
}

/** rememberOrder stores the buyer's order of a product, or forgets it when order is null. */
export function rememberOrder(buyer, productID, order) {
  const all = readAll(ORDERS_KEY);
  const mine = all[buyer] && typeof all[buyer] === 'object' ? all[buyer] : {};
  if (order) {
    mine[productID] = { orderID: String(order.orderID), status: String(order.status) };
  } else {
    delete mine[productID];
  }
  all[buyer] = mine;
  // Keep the record small: the 20 buyers seen last.
  const buyers = Object.keys(all);
  for (const old of buyers.slice(0, Math.max(0, buyers.length - 20))) delete all[old];
  write(ORDERS_KEY, JSON.stringify(all));
}

/** forgetProduct drops every buyer's order and line of a product (after an admin reset cleared them). */
export function forgetProduct(productID) {
  for (const key of [ORDERS_KEY, QUEUES_KEY]) {
    const all = readAll(key);
    for (const buyer of Object.keys(all)) {
      if (all[buyer] && typeof all[buyer] === 'object') delete all[buyer][productID];
    }
    write(key, JSON.stringify(all));
  }
}

/** readAll returns the object stored under key (every buyer's entries), or {} if there is none or it is not one. */
function readAll(key) {
  try {
    const v = JSON.parse(read(key) || '{}');
    return v && typeof v === 'object' ? v : {};
  } catch {
    return {};
  }
}

/**
 * queuesOf returns {productID: {sale, ticket, startAhead}} of the waiting-room lines the buyer
 * joined here: the sale (its epoch: a reset starts a new line), the ticket's number, and how many
 * were ahead when the page first saw it (where the progress bar starts).
 */
export function queuesOf(buyer) {
  const mine = readAll(QUEUES_KEY)[buyer];
  return mine && typeof mine === 'object' ? mine : {};
}

/** rememberQueue stores the buyer's place in a product's line, or forgets it when place is null. */
export function rememberQueue(buyer, productID, place) {
  const all = readAll(QUEUES_KEY);
  const mine = all[buyer] && typeof all[buyer] === 'object' ? all[buyer] : {};
  if (place) {
    mine[productID] = { sale: String(place.sale), ticket: Number(place.ticket) || 0, startAhead: Number(place.startAhead) || 0 };
  } else {
    delete mine[productID];
  }
  all[buyer] = mine;
  const buyers = Object.keys(all);
  for (const old of buyers.slice(0, Math.max(0, buyers.length - 20))) delete all[old];
  write(QUEUES_KEY, JSON.stringify(all));
}
