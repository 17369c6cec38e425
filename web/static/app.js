// The storefront: product cards with live stock and countdowns, the buyer's identity, the buy flow
// (Idempotency-Key, queued → confirmed), a waiting-room sale's line (join, wait for the turn, buy
// with the pass: queue.js), paying or cancelling the order within its payment window
// (confirmed → paid, or expired / cancelled with the unit back on sale) and the demo drawer.
// The products and their public figures come from the server's event stream (live.js), or from
// polling while the stream is unavailable; the exact audit only to a tab with the admin token.
// Nothing is followed while the tab is hidden.

import * as api from './api.js';
import { offsetMs, probeDelay, serverNowEarliest, serverNowLatest, synced, uncertaintyMs } from './clock.js';
import { CardView, closedStatuses, saleState, setText } from './cards.js';
import { Drawer } from './drawer.js';
import { formatSeconds } from './format.js';
import { LiveFeed } from './live.js';
import { Line, waitingRoom } from './queue.js';
import { loadStrategies } from './strategies.js';
import {
  currentBuyer, forgetProduct, ordersOf, queuesOf, rememberOrder, rememberQueue, setBuyer, setBuyerToken, tokenOf, tokenSubject, validBuyer,
} from './identity.js';
import { cancelMessage, payMessage, payRetryableCodes, purchaseMessage, retryableCodes } from './messages.js';

const REFRESH_MS = 1000;
const FAST_REFRESH_MS = 500;
const TICK_MS = 250;
const ORDER_POLL_MS = 500;
// A confirmed order is polled this often (another tab may pay it) until its window is about to close.
const AWAITING_POLL_MS = 3000;
// A reset product's remembered order is checked (GET the order: 404) at most this often.
const RECHECK_MS = 5000;
// The admin route's audit is a scan of the sale in MySQL: one round of the cards on screen, then
// this long before the next.
const AUDIT_MS = 1000;
// While the stream feeds the page, the server clock is probed this many times at most to tighten
// its estimate, then once this often.
const CLOCK_PROBES = 10;
const CLOCK_MS = 60000;

const $ = (id) => document.getElementById(id);

const state = {
  buyer: currentBuyer(),
  /**
   * Each product's public figures (stats) and, in a tab with the admin token, its exact audit
   * (audit: the admin route's last answer, {} until the first; null without the token).
   * line is the buyer's place in a waiting-room sale's line (queue.js), null when not in it.
   * @type {Map<number, {product: object, stats: object|null, statsAt: number, audit: object|null, purchase: object, line: Line|null, verdict: object|null}>}
   */
  entries: new Map(),
  /** @type {Map<number, CardView>} */
  views: new Map(),
  loaded: false,
  failures: 0,
  fastUntil: 0,
};

// ---------------------------------------------------------------- the event stream

const live = new LiveFeed({
  snapshot(items) {
    follow(() => {
      const known = items.filter((item) => item && item.product);
      apply(known.map((item) => item.product), known.map((item) => item.stats));
    });
  },
  event(type, item) {
    follow(() => applyEvent(type, item));
  },
  mode(mode) {
    grid.dataset.feed = mode;
    if (mode === 'polling') {
      refresh();
    } else {
      clearTimeout(refreshTimer);
      state.failures = 0;
      showBanner('');
    }
    probeClock();
  },
});

let following = Promise.resolve();

/**
 * follow applies the stream's events in order, each once the strategy catalog has been read (or
 * could not be), so that the cards are drawn with their notes and their unsafe badges from the start.
 */
function follow(f) {
  following = following.then(loadStrategies).then(f).catch((err) => console.error('event stream:', err));
}

/**
 * applyEvent records one product's event ({product, stats}) and shows it: a product listed
 * later comes as a reset event. (A product is listed or not for good: none leaves the list.)
 */
function applyEvent(type, { product, stats }) {
  if (upsert(product, stats, type === 'reset')) renderAll();
  else render(product.id);
  drawer.productsChanged(productList());
}

// ---------------------------------------------------------------- a waiting room's line

/**
 * followLine keeps the entry's line in step with its product: a line for a waiting-room sale the
 * buyer joined here (remembered: a reload keeps the place) and has no order of; none otherwise.
 * The product as the stream (or a list) has it closes a line at once when the sale sold out or
 * ended; a reset sends the line to ask the room, which tells of a new sale (a new, empty line).
 */
function followLine(entry, reset) {
  const id = entry.product.id;
  const room = waitingRoom(entry.product);
  if (entry.line && (!room || entry.purchase.orderID || entry.line.buyer !== state.buyer)) {
    if (entry.purchase.orderID || !room) entry.line.done();
    else entry.line.stop();
    entry.line = null;
  }
  if (!room || entry.purchase.orderID) {
    if (room && queuesOf(state.buyer)[id]) rememberQueue(state.buyer, id, null);
    return;
  }
  if (!entry.line) {
    const remembered = queuesOf(state.buyer)[id];
    if (!remembered) return;
    entry.line = new Line(id, state.buyer, () => render(id), remembered);
    entry.line.resume();
  }
  if (reset) entry.line.pollNow();
  entry.line.saleChanged(entry.product);
}

/** join puts the buyer in a waiting-room sale's line (again, after being skipped or a turn over). */
function join(id) {
  const entry = state.entries.get(id);
  if (!entry || !waitingRoom(entry.product) || entry.purchase.orderID) return;
  if (!entry.line || entry.line.buyer !== state.buyer) {
    if (entry.line) entry.line.stop();
    entry.line = new Line(id, state.buyer, () => render(id));
  }
  entry.purchase.error = '';
  entry.line.join();
}

// ---------------------------------------------------------------- refresh loop (no stream)

let refreshTimer = 0;
let refreshing = false;

async function refresh() {
  if (refreshing || live.mode !== 'polling') return;
  refreshing = true;
  clearTimeout(refreshTimer);
  try {
    // The strategy catalog (read once) comes with the first list, so that the cards are drawn
    // with their notes and their unsafe badges from the start; a failure to read it costs only those.
    const catalog = loadStrategies();
    const list = await api.products();
    await catalog;
    if (live.mode !== 'polling') return; // the stream is back: its snapshot is newer than this list
    // Each product of the list carries its viewer figures: one request a second follows every card.
    const stats = list.map((p) => p.stats || null);
    apply(list, stats);
    state.failures = 0;
    showBanner('');
  } catch (err) {
    state.failures++;
    if (state.failures >= 2 || !state.loaded) {
      showBanner(err && err.code === 'network'
        ? 'The shop cannot be reached right now. Retrying every second…'
        : 'The shop is not answering properly right now. Retrying every second…');
    }
  } finally {
    refreshing = false;
    scheduleRefresh();
  }
}

function scheduleRefresh() {
  clearTimeout(refreshTimer);
  if (document.hidden || live.mode !== 'polling') return;
  // Until the server clock estimate is tight, time the refresh so that its answer's Date header
  // halves the uncertainty (clock.js); then refresh at the period, with a little jitter.
  const period = Date.now() < state.fastUntil ? FAST_REFRESH_MS : REFRESH_MS;
  const min = Math.round(period * 0.7);
  const probe = probeDelay(min);
  refreshTimer = setTimeout(refresh, probe > min ? probe : period * (0.85 + Math.random() * 0.3));
}

/** speedUp refreshes now and twice a second for the next ms milliseconds, when polling. */
function speedUp(ms = 15000) {
  state.fastUntil = Math.max(state.fastUntil, Date.now() + ms);
  refresh();
}

// Only the cards on screen read their audit every second (admin token): a long list stays cheap
// to watch.
const onScreen = new Set();
const screenWatch = 'IntersectionObserver' in window
  ? new IntersectionObserver((seen) => {
    for (const e of seen) {
      const id = Number(e.target.dataset.productId);
      if (e.isIntersecting) onScreen.add(id);
      else onScreen.delete(id);
    }
  }, { rootMargin: '200px 0px' })
  : null;

/** @type {Map<string, object>} the last answer of GET /api/v1/orders/{id} for each order polled */
const lastOrders = new Map();

/**
 * newPurchase is a card's purchase state: the buy attempt (phase, retryKey, error), the order
 * (orderID, status, and order, the API's last answer) and its payment attempt (payPhase, payKey:
 * the Idempotency-Key to retry with, declined, payError) or cancellation (cancelPhase).
 */
function newPurchase(productID) {
  const mine = ordersOf(state.buyer)[productID];
  const known = mine ? lastOrders.get(mine.orderID) : null;
  return {
    phase: 'idle', orderID: mine ? mine.orderID : '', status: known ? known.status : mine ? mine.status : '', error: '', retryKey: '',
    order: known || null, payPhase: '', payKey: '', declined: false, payError: '', cancelPhase: '',
  };
}

/** apply replaces the products listed (a list polled, or the stream's snapshot), stats[i] being list[i]'s figures. */
function apply(list, stats) {
  const seen = new Set();
  list.forEach((product, i) => {
    seen.add(product.id);
    upsert(product, stats[i], false);
  });
  for (const id of [...state.entries.keys()]) {
    if (!seen.has(id)) remove(id);
  }
  renderAll();
  drawer.productsChanged(productList());
}

/**
 * upsert records a product and its public figures (if any), and reports whether it is new. A
 * reset event, or no unit sold while this buyer's order holds one, says the sale may have been
 * reset: the order remembered for it is then gone too, which the order's poll finds out (404).
 * Not forgotten from the figures alone: an expired or cancelled order's unit is back in stock
 * (not sold) and the order still there to show; only the stream's reset event tells of its reset.
 */
function upsert(product, stats, reset) {
  let entry = state.entries.get(product.id);
  const added = !entry;
  if (added) {
    entry = {
      product, stats: null, statsAt: 0, audit: drawer.currentToken() ? {} : null, purchase: newPurchase(product.id), line: null, verdict: null,
    };
    state.entries.set(product.id, entry);
  }
  entry.product = product;
  if (stats) {
    entry.stats = stats;
    entry.statsAt = Date.now();
  }
  const pu = entry.purchase;
  const returned = closedStatuses.has(pu.status) && pu.order !== null && pu.order.returned === true;
  if (pu.orderID && pu.phase !== 'sending' && (reset || (entry.stats && entry.stats.sold_units === 0 && !returned))) {
    recheckOrder(state.buyer, product.id, pu.orderID);
  }
  followLine(entry, reset);
  return added;
}

function remove(id) {
  const entry = state.entries.get(id);
  if (entry && entry.line) entry.line.stop();
  state.entries.delete(id);
  const view = state.views.get(id);
  if (view) {
    if (screenWatch) screenWatch.unobserve(view.root);
    view.root.remove();
  }
  state.views.delete(id);
  onScreen.delete(id);
}

/** productList lists the products known, by id. */
function productList() {
  return [...state.entries.values()].map((e) => e.product).sort((a, b) => a.id - b.id);
}

// ---------------------------------------------------------------- the operators' audit

let auditTimer = 0;
let auditing = false;

/**
 * pollAudit reads the exact audit of the cards on screen and of the race (GET
 * /api/v1/admin/products/{id}/stats, a scan of the sale in MySQL) one card after the other, then
 * again AUDIT_MS later, only while this tab holds the admin token: the public figures tell
 * nothing of reservations, orders or overselling.
 */
async function pollAudit() {
  if (auditing) return;
  clearTimeout(auditTimer);
  const token = drawer.currentToken();
  if (!token || document.hidden) return;
  auditing = true;
  try {
    const ids = [...state.entries.keys()].filter((id) => !screenWatch || onScreen.has(id) || id === drawer.raceProduct);
    for (const id of ids) {
      let audit;
      try {
        audit = await api.adminStats(token, id);
      } catch (err) {
        // A wrong token is forgotten at once: the server makes an address that sends them wait.
        if (err.code === 'unauthorized') {
          drawer.setToken('');
          return;
        }
        continue;
      }
      const entry = state.entries.get(id);
      if (entry && entry.audit && drawer.currentToken() === token) {
        entry.audit = audit;
        render(id);
        drawer.statsChanged(id);
      }
    }
  } finally {
    auditing = false;
  }
  auditTimer = setTimeout(pollAudit, AUDIT_MS);
}

// ---------------------------------------------------------------- the server clock (stream)

let clockTimer = 0;
let clockProbes = 0;

/**
 * probeClock keeps the server clock estimate (clock.js) tight while no poll feeds it the Date of
 * its answers: a few cheap requests (GET /healthz), each timed by probeDelay to halve the
 * uncertainty, then one a minute, which notices a clock that jumped.
 */
function probeClock() {
  clearTimeout(clockTimer);
  if (document.hidden || live.mode === 'polling') return;
  const fast = uncertaintyMs() >= 25 && clockProbes < CLOCK_PROBES;
  clockTimer = setTimeout(() => {
    clockProbes++;
    api.health().catch(() => {}).finally(probeClock);
  }, probeDelay(fast ? FAST_REFRESH_MS : CLOCK_MS));
}

// ---------------------------------------------------------------- rendering

const grid = $('products');
const template = $('card-template');

function renderAll() {
  const now = serverNowEarliest();
  let previous = null;
  for (const [id, entry] of [...state.entries].sort((a, b) => a[0] - b[0])) {
    let view = state.views.get(id);
    if (!view) {
      view = new CardView(template, entry.product, { buy, join, pay, cancel });
      state.views.set(id, view);
      if (screenWatch) screenWatch.observe(view.root);
    }
    // Keep the DOM in id order without moving cards that are already in place (focus stays put).
    const want = previous ? previous.nextElementSibling : grid.firstElementChild;
    if (want !== view.root) {
      if (previous) previous.after(view.root);
      else grid.prepend(view.root);
    }
    previous = view.root;
    view.update(entry, now);
  }
  if (state.entries.size > 0 || state.loaded) {
    $('products-empty').hidden = state.entries.size > 0;
    setText($('products-empty'), 'No sales yet. Create one with the admin API, or run `make up`, which seeds demo sales.');
  }
  state.loaded = true;
  grid.setAttribute('aria-busy', 'false');
}

function render(id) {
  const view = state.views.get(id);
  const entry = state.entries.get(id);
  if (view && entry) view.update(entry, serverNowEarliest());
}

function showBanner(text) {
  const b = $('banner');
  setText(b, text);
  b.hidden = !text;
}

let tickTimer = 0;
let lastClockNote = 0;

function tick() {
  const now = serverNowEarliest();
  for (const [id, view] of state.views) {
    const entry = state.entries.get(id);
    if (!entry) continue;
    const before = view.lastPhase;
    view.update(entry, now);
    if (before === 'upcoming' && view.lastPhase === 'open') refresh(); // the sale just opened
  }
  if (Date.now() - lastClockNote > 5000 && synced()) {
    lastClockNote = Date.now();
    const off = offsetMs();
    const side = Math.abs(off) < 500 ? 'in step with' : off > 0 ? `${formatSeconds(off)} behind` : `${formatSeconds(-off)} ahead of`;
    setText($('clock-status'), `this browser's clock is ${side} the server's (±${Math.round(uncertaintyMs())} ms); the countdowns follow the server.`);
  }
}

function startTicking() {
  clearInterval(tickTimer);
  tickTimer = setInterval(tick, TICK_MS);
}

// ---------------------------------------------------------------- buying

async function buy(id) {
  const entry = state.entries.get(id);
  const view = state.views.get(id);
  if (!entry || !view) return;
  const pu = entry.purchase;
  if (pu.phase === 'sending' || pu.orderID) return;
  if (saleState(entry.product, serverNowEarliest()).phase !== 'open') return;
  // A waiting-room sale is bought with the pass its line gave the buyer: only in their turn.
  const line = waitingRoom(entry.product) ? entry.line : null;
  const held = line ? line.pass(serverNowLatest()) : null;
  if (waitingRoom(entry.product) && !held) return;
  const hadFocus = document.activeElement === view.button;
  const buyer = state.buyer;
  // The same key for a retry of an unanswered or refused-for-now purchase: it can never buy twice.
  const key = pu.retryKey || api.newIdempotencyKey();
  pu.phase = 'sending';
  pu.error = '';
  pu.retryKey = key;
  render(id);
  try {
    const receipt = await purchaseAtOpening(entry, buyer, key, held ? held.pass : undefined);
    rememberOrder(buyer, id, { orderID: receipt.order_id, status: receipt.status });
    if (line) {
      // Bought: the order is followed from now on, the line no more.
      line.done();
      if (entry.line === line) entry.line = null;
    }
    if (buyer === state.buyer) {
      pu.orderID = receipt.order_id;
      pu.status = receipt.status;
      pu.retryKey = '';
    }
    pollOrder(buyer, id, receipt.order_id);
    speedUp(5000);
  } catch (err) {
    pu.error = purchaseMessage(err);
    if (!retryableCodes.has(err.code)) pu.retryKey = '';
    if (err.code === 'sold_out' || err.code === 'sale_ended' || err.code === 'sale_not_started') refresh();
    // A pass refused: the line says where the buyer stands (a turn over: join again), or signs a
    // fresh pass for the turn that still runs.
    if (line && entry.line === line && String(err.code).startsWith('admission_pass_')) line.pollNow();
  } finally {
    pu.phase = 'idle';
    render(id);
    if (hadFocus && (document.activeElement === document.body || document.activeElement === null)) {
      if (!view.button.disabled) view.button.focus();
      else view.title.focus();
    }
  }
}

/**
 * purchaseAtOpening sends the purchase; if the server says the sale has not started although it
 * opened by this page's clock (a start time with a fraction of a second, or the clock estimate's
 * last few milliseconds), it tries again with the same key for up to two seconds. pass is the
 * buyer's admission pass to a waiting-room sale.
 */
async function purchaseAtOpening(entry, buyer, key, pass) {
  const opened = Date.parse(entry.product.sale_starts_at);
  for (;;) {
    try {
      return await api.purchase(entry.product.id, buyer, key, tokenOf(buyer) || undefined, pass);
    } catch (err) {
      if (err.code !== 'sale_not_started' || serverNowEarliest() - opened > 2000) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** @type {Map<string, {buyer: string, productID: number, started: number, closedSeen: number, timer: number}>} */
const orderPolls = new Map();
/** @type {Map<string, number>} when each order was last rechecked after its product's stats read 0 reserved */
const rechecked = new Map();

/** pollOrder follows an order until it is settled (settled below); after delay ms, the first time. */
function pollOrder(buyer, productID, orderID, delay = ORDER_POLL_MS) {
  if (orderPolls.has(orderID)) return;
  const poll = { buyer, productID, started: Date.now(), closedSeen: 0, timer: 0 };
  orderPolls.set(orderID, poll);
  poll.timer = setTimeout(() => checkOrder(orderID), delay);
}

/** checkOrderNow asks for the order after delay ms, following it from now on if it was not. */
function checkOrderNow(buyer, productID, orderID, delay = 0) {
  const poll = orderPolls.get(orderID);
  if (!poll) {
    pollOrder(buyer, productID, orderID, delay);
    return;
  }
  clearTimeout(poll.timer);
  poll.timer = setTimeout(() => checkOrder(orderID), delay);
}

function recheckOrder(buyer, productID, orderID) {
  if (orderPolls.has(orderID) || Date.now() - (rechecked.get(orderID) || 0) < RECHECK_MS) return;
  rechecked.set(orderID, Date.now());
  pollOrder(buyer, productID, orderID, 0);
}

function stopOrderPoll(orderID) {
  const poll = orderPolls.get(orderID);
  if (poll) clearTimeout(poll.timer);
  orderPolls.delete(orderID);
}

/**
 * settled reports whether an order will not change any more, by itself or by this page: paid;
 * refused (accepted, then refused when it was recorded: final); expired or cancelled with its unit
 * back on sale; or confirmed by a server that has no payment window (no expires_at: nothing to pay).
 */
function settled(o) {
  return o.status === 'paid' || o.status === 'refused' || (closedStatuses.has(o.status) && o.returned === true) ||
    (o.status === 'confirmed' && !o.expires_at);
}

/** nextOrderPoll says how long to wait before asking for the order again. */
function nextOrderPoll(poll, o) {
  if (o && o.status === 'confirmed' && o.expires_at) {
    // Now and then while the window is open (another tab may pay), quickly around its end.
    const left = Date.parse(o.expires_at) - serverNowLatest();
    return left > AWAITING_POLL_MS || left < -60000 ? AWAITING_POLL_MS : ORDER_POLL_MS;
  }
  if (o && closedStatuses.has(o.status)) {
    // Its unit is on its way back to the stock: quickly for half a minute.
    return Date.now() - poll.closedSeen < 30000 ? ORDER_POLL_MS : 3000;
  }
  if (o && o.status === 'paying') return ORDER_POLL_MS;
  // Twice a second for a minute, then every 3 s: an order stays queued while the broker is away.
  return Date.now() - poll.started < 60000 ? ORDER_POLL_MS : 3000;
}

/** applyOrder records an answer of GET (or pay, or cancel) for the order and shows it. */
function applyOrder(buyer, productID, orderID, o) {
  lastOrders.set(orderID, o);
  rememberOrder(buyer, productID, { orderID, status: o.status });
  const entry = state.entries.get(productID);
  if (!entry || buyer !== state.buyer || entry.purchase.orderID !== orderID) return;
  const pu = entry.purchase;
  const before = `${pu.status}/${pu.order ? pu.order.returned : ''}`;
  pu.status = o.status;
  pu.order = o;
  if (o.status !== 'confirmed') {
    // Nothing left to pay: no retry, and the order line says what happened instead of an error.
    pu.payKey = '';
    pu.declined = false;
    pu.payError = '';
  }
  if (`${o.status}/${o.returned}` !== before && (closedStatuses.has(o.status) || o.status === 'paid')) {
    speedUp(5000); // the stock (a unit back on sale) and the live panel's counters changed
  }
  render(productID);
}

async function checkOrder(orderID) {
  const poll = orderPolls.get(orderID);
  if (!poll || document.hidden) return; // resumed by the visibilitychange handler
  let o = null;
  try {
    o = await api.order(orderID, poll.buyer, tokenOf(poll.buyer) || undefined);
    if (!orderPolls.has(orderID)) return;
    applyOrder(poll.buyer, poll.productID, orderID, o);
    if (closedStatuses.has(o.status) && !poll.closedSeen) poll.closedSeen = Date.now();
    // A closed order whose unit has not come back yet is followed for two minutes at most.
    if (settled(o) || (poll.closedSeen && Date.now() - poll.closedSeen > 120000)) {
      stopOrderPoll(orderID);
      return;
    }
  } catch (err) {
    if (err.code === 'not_found') { // the product was reset meanwhile
      rememberOrder(poll.buyer, poll.productID, null);
      lastOrders.delete(orderID);
      stopOrderPoll(orderID);
      const entry = state.entries.get(poll.productID);
      if (entry && entry.purchase.orderID === orderID && entry.purchase.phase !== 'sending') {
        entry.purchase = newPurchase(poll.productID);
        render(poll.productID);
      }
      return;
    }
    o = lastOrders.get(orderID) || null;
  }
  if (!orderPolls.has(orderID) || document.hidden) return;
  poll.timer = setTimeout(() => checkOrder(orderID), nextOrderPoll(poll, o));
}

// ---------------------------------------------------------------- paying or cancelling

/** keepFocus moves focus to the order when the button that had it went away or was disabled. */
function keepFocus(view, button, hadFocus) {
  if (!hadFocus || (document.activeElement !== document.body && document.activeElement !== null)) return;
  if (!button.disabled && !view.payBox.hidden && !button.hidden) button.focus();
  else view.order.focus();
}

/**
 * pay pays the card's confirmed order. One Idempotency-Key per payment attempt: the retry of an
 * unanswered attempt (no answer, 503) reuses it, so it gets that attempt's answer and can never
 * charge twice; after a decline the next attempt is a new payment with a new key.
 */
async function pay(id) {
  const entry = state.entries.get(id);
  const view = state.views.get(id);
  if (!entry || !view) return;
  const pu = entry.purchase;
  const orderID = pu.orderID;
  if (!orderID || pu.status !== 'confirmed' || pu.payPhase || pu.cancelPhase) return;
  const buyer = state.buyer;
  const hadFocus = document.activeElement === view.payButton;
  const key = pu.payKey || api.newIdempotencyKey();
  pu.payKey = key;
  pu.payPhase = 'paying';
  pu.payError = '';
  pu.error = '';
  render(id);
  try {
    const o = await api.pay(orderID, buyer, key, tokenOf(buyer) || undefined);
    pu.payKey = '';
    applyOrder(buyer, id, orderID, o);
    if (!settled(o)) checkOrderNow(buyer, id, orderID, ORDER_POLL_MS);
  } catch (err) {
    pu.payError = payMessage(err);
    pu.declined = err.code === 'payment_declined';
    if (!payRetryableCodes.has(err.code)) pu.payKey = '';
    // The order moved on (expired, cancelled, paid elsewhere, being paid, gone): show where it is.
    if (['order_expired', 'order_cancelled', 'order_already_paid', 'payment_in_progress', 'not_found'].includes(err.code)) {
      checkOrderNow(buyer, id, orderID);
    }
  } finally {
    pu.payPhase = '';
    render(id);
    keepFocus(view, view.payButton, hadFocus);
  }
}

/** cancel gives the card's confirmed order up, as its buyer asked (the card asks first). */
async function cancel(id) {
  const entry = state.entries.get(id);
  const view = state.views.get(id);
  if (!entry || !view) return;
  const pu = entry.purchase;
  const orderID = pu.orderID;
  if (!orderID || pu.status !== 'confirmed' || pu.payPhase || pu.cancelPhase) return;
  const buyer = state.buyer;
  pu.cancelPhase = 'cancelling';
  pu.payError = '';
  pu.error = '';
  render(id);
  try {
    const o = await api.cancelOrder(orderID, buyer, tokenOf(buyer) || undefined);
    applyOrder(buyer, id, orderID, o);
    // Its unit goes back on sale right after: follow it there.
    if (!settled(o)) checkOrderNow(buyer, id, orderID, ORDER_POLL_MS);
  } catch (err) {
    pu.payError = cancelMessage(err);
    if (['order_already_paid', 'order_expired', 'payment_in_progress', 'not_found'].includes(err.code)) {
      checkOrderNow(buyer, id, orderID);
    }
  } finally {
    pu.cancelPhase = '';
    render(id);
    keepFocus(view, view.cancelButton, true);
  }
}

function resumeOrderPolls() {
  for (const [orderID, poll] of orderPolls) {
    clearTimeout(poll.timer);
    poll.timer = setTimeout(() => checkOrder(orderID), 0);
  }
}

// ---------------------------------------------------------------- buyer identity

function showBuyer() {
  setText($('buyer-id'), tokenOf(state.buyer) ? `${state.buyer} (token)` : state.buyer);
}

function switchBuyer(id) {
  setBuyer(id);
  state.buyer = id;
  showBuyer();
  for (const [productID, entry] of state.entries) {
    entry.purchase = newPurchase(productID);
    followLine(entry, false); // the new buyer's line, if they joined one here
  }
  followOrders(id);
  renderAll();
}

/** followOrders polls the buyer's remembered orders: each until settled, each at least once for its details. */
function followOrders(buyer) {
  for (const [productID, o] of Object.entries(ordersOf(buyer))) pollOrder(buyer, Number(productID), o.orderID, 0);
}

const HINT = '1–64 letters, digits, “-” or “_”; or a buyer token, where the shop verifies buyers.';

function setupBuyerForm() {
  const form = $('buyer-form');
  const show = $('buyer-show');
  const edit = $('buyer-edit');
  const input = $('buyer-input');
  const hint = $('buyer-hint');
  const open = (yes) => {
    form.hidden = !yes;
    show.hidden = yes;
    edit.setAttribute('aria-expanded', String(yes));
    if (yes) {
      input.value = state.buyer;
      input.removeAttribute('aria-invalid');
      hint.classList.remove('invalid');
      setText(hint, HINT);
      input.focus();
      input.select();
    } else {
      edit.focus();
    }
  };
  edit.addEventListener('click', () => open(true));
  $('buyer-cancel').addEventListener('click', () => open(false));
  form.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      open(false);
    }
  });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const value = input.value.trim();
    // A buyer token (three dot-separated parts) names its buyer; a name is a claim.
    const id = value.includes('.') ? tokenSubject(value) : value;
    if (!id || !validBuyer(id)) {
      input.setAttribute('aria-invalid', 'true');
      hint.classList.add('invalid');
      setText(hint, value.includes('.')
        ? 'Not a buyer token: it has no valid user id as its subject.'
        : 'Not a valid buyer name: use 1–64 letters, digits, “-” or “_”, no spaces.');
      input.focus();
      return;
    }
    if (value.includes('.')) setBuyerToken(value);
    if (id !== state.buyer) switchBuyer(id);
    else showBuyer();
    open(false);
  });
}

// ---------------------------------------------------------------- drawer

const drawer = new Drawer({
  products: () => [...state.entries.values()].map((e) => e.product),
  // The public figures, fresher, over the audit's (reservations, orders, oversold).
  stats(id) {
    const entry = state.entries.get(id);
    return entry && entry.stats ? { ...entry.audit, ...entry.stats } : null;
  },
  speedUp,
  onReset(id) {
    forgetProduct(id);
    const entry = state.entries.get(id);
    if (entry) {
      if (entry.purchase.orderID) stopOrderPoll(entry.purchase.orderID);
      entry.purchase = newPurchase(id);
      if (entry.line) entry.line.stop(); // a reset starts a new sale, with a new, empty line
      entry.line = null;
      entry.verdict = null;
    }
    refresh();
  },
  setVerdict(id, verdict) {
    const entry = state.entries.get(id);
    if (entry) {
      entry.verdict = verdict;
      render(id);
    }
  },
  tokenChanged() {
    const operator = Boolean(drawer.currentToken());
    for (const entry of state.entries.values()) entry.audit = operator ? entry.audit || {} : null;
    renderAll();
    pollAudit();
  },
});

// ---------------------------------------------------------------- start

document.addEventListener('visibilitychange', () => {
  if (document.hidden) {
    live.stop();
    clearTimeout(refreshTimer);
    clearTimeout(clockTimer);
    clearTimeout(auditTimer);
    clearInterval(tickTimer);
    drawer.pause();
    return;
  }
  live.start();
  refresh();
  probeClock();
  pollAudit();
  startTicking();
  resumeOrderPolls();
  drawer.resume();
});

showBuyer();
setupBuyerForm();
followOrders(state.buyer);
grid.dataset.feed = live.mode;
loadStrategies(); // alongside the stream's opening: its snapshot waits for the catalog
if (!document.hidden) live.start();
probeClock();
pollAudit();
startTicking();
