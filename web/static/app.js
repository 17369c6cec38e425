// The storefront: product cards with live stock and countdowns, the buyer's identity, the buy flow
// (Idempotency-Key, queued → confirmed) and the demo drawer. Polling only while the tab is visible.

import * as api from './api.js';
import { offsetMs, probeDelay, serverNowEarliest, synced, uncertaintyMs } from './clock.js';
import { CardView, saleState, setText } from './cards.js';
import { Drawer } from './drawer.js';
import { formatSeconds } from './format.js';
import {
  currentBuyer, forgetProduct, ordersOf, rememberOrder, setBuyer, setBuyerToken, tokenOf, tokenSubject, validBuyer,
} from './identity.js';
import { purchaseMessage, retryableCodes } from './messages.js';

const REFRESH_MS = 1000;
// Cards out of view get their stats this often; cards in view (and the race) every refresh.
const HIDDEN_STATS_MS = 10000;
const FAST_REFRESH_MS = 500;
const TICK_MS = 250;
const ORDER_POLL_MS = 500;

const $ = (id) => document.getElementById(id);

const state = {
  buyer: currentBuyer(),
  /** @type {Map<number, {product: object, stats: object|null, statsAt: number, purchase: object, verdict: object|null}>} */
  entries: new Map(),
  /** @type {Map<number, CardView>} */
  views: new Map(),
  loaded: false,
  failures: 0,
  fastUntil: 0,
};

// ---------------------------------------------------------------- refresh loop

let refreshTimer = 0;
let refreshing = false;

async function refresh() {
  if (refreshing) return;
  refreshing = true;
  clearTimeout(refreshTimer);
  try {
    const list = await api.products();
    const now = Date.now();
    const stats = await Promise.all(list.map((p) => (wantsStats(p.id, now) ? api.stats(p.id).catch(() => null) : null)));
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
  if (document.hidden) return;
  // Until the server clock estimate is tight, time the refresh so that its answer's Date header
  // halves the uncertainty (clock.js); then refresh at the period, with a little jitter.
  const period = Date.now() < state.fastUntil ? FAST_REFRESH_MS : REFRESH_MS;
  const min = Math.round(period * 0.7);
  const probe = probeDelay(min);
  refreshTimer = setTimeout(refresh, probe > min ? probe : period * (0.85 + Math.random() * 0.3));
}

/** speedUp refreshes now and twice a second for the next ms milliseconds. */
function speedUp(ms = 15000) {
  state.fastUntil = Math.max(state.fastUntil, Date.now() + ms);
  refresh();
}

// Only the cards on screen poll their stats every second: a long list stays cheap to watch.
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

function wantsStats(id, now) {
  const entry = state.entries.get(id);
  return !screenWatch || !entry || !entry.stats || onScreen.has(id) || id === drawer.raceProduct ||
    now - entry.statsAt > HIDDEN_STATS_MS;
}

function newPurchase(productID) {
  const mine = ordersOf(state.buyer)[productID];
  return { phase: 'idle', orderID: mine ? mine.orderID : '', status: mine ? mine.status : '', error: '', retryKey: '' };
}

function apply(list, stats) {
  const seen = new Set();
  list.sort((a, b) => a.id - b.id);
  list.forEach((product, i) => {
    seen.add(product.id);
    let entry = state.entries.get(product.id);
    if (!entry) {
      entry = { product, stats: null, statsAt: 0, purchase: newPurchase(product.id), verdict: null };
      state.entries.set(product.id, entry);
    }
    entry.product = product;
    if (stats[i]) {
      entry.stats = stats[i];
      entry.statsAt = Date.now();
    }
    // A product whose reservations are all gone was reset: an order remembered for it is gone too.
    if (entry.purchase.orderID && entry.stats && entry.stats.reserved === 0 && entry.purchase.phase !== 'sending') {
      rememberOrder(state.buyer, product.id, null);
      stopOrderPoll(entry.purchase.orderID);
      entry.purchase = newPurchase(product.id);
    }
  });
  for (const id of [...state.entries.keys()]) {
    if (!seen.has(id)) {
      state.entries.delete(id);
      const view = state.views.get(id);
      if (view) {
        if (screenWatch) screenWatch.unobserve(view.root);
        view.root.remove();
      }
      state.views.delete(id);
      onScreen.delete(id);
    }
  }
  renderAll();
  drawer.productsChanged(list);
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
      view = new CardView(template, entry.product, buy);
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
  const hadFocus = document.activeElement === view.button;
  const buyer = state.buyer;
  // The same key for a retry of an unanswered or refused-for-now purchase: it can never buy twice.
  const key = pu.retryKey || api.newIdempotencyKey();
  pu.phase = 'sending';
  pu.error = '';
  pu.retryKey = key;
  render(id);
  try {
    const receipt = await purchaseAtOpening(entry, buyer, key);
    rememberOrder(buyer, id, { orderID: receipt.order_id, status: receipt.status });
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
 * last few milliseconds), it tries again with the same key for up to two seconds.
 */
async function purchaseAtOpening(entry, buyer, key) {
  const opened = Date.parse(entry.product.sale_starts_at);
  for (;;) {
    try {
      return await api.purchase(entry.product.id, buyer, key, tokenOf(buyer) || undefined);
    } catch (err) {
      if (err.code !== 'sale_not_started' || serverNowEarliest() - opened > 2000) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** @type {Map<string, {buyer: string, productID: number, started: number, timer: number}>} */
const orderPolls = new Map();

function pollOrder(buyer, productID, orderID) {
  if (orderPolls.has(orderID)) return;
  const poll = { buyer, productID, started: Date.now(), timer: 0 };
  orderPolls.set(orderID, poll);
  poll.timer = setTimeout(() => checkOrder(orderID), ORDER_POLL_MS);
}

function stopOrderPoll(orderID) {
  const poll = orderPolls.get(orderID);
  if (poll) clearTimeout(poll.timer);
  orderPolls.delete(orderID);
}

async function checkOrder(orderID) {
  const poll = orderPolls.get(orderID);
  if (!poll || document.hidden) return; // resumed by the visibilitychange handler
  try {
    const o = await api.order(orderID);
    if (o.status === 'confirmed') {
      rememberOrder(poll.buyer, poll.productID, { orderID, status: 'confirmed' });
      const entry = state.entries.get(poll.productID);
      if (entry && poll.buyer === state.buyer && entry.purchase.orderID === orderID) {
        entry.purchase.status = 'confirmed';
        render(poll.productID);
      }
      stopOrderPoll(orderID);
      return;
    }
  } catch (err) {
    if (err.code === 'not_found') { // the product was reset meanwhile
      rememberOrder(poll.buyer, poll.productID, null);
      stopOrderPoll(orderID);
      return;
    }
  }
  if (!orderPolls.has(orderID) || document.hidden) return;
  // Twice a second for a minute, then every 3 s: an order stays queued while the broker is away.
  const wait = Date.now() - poll.started < 60000 ? ORDER_POLL_MS : 3000;
  poll.timer = setTimeout(() => checkOrder(orderID), wait);
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
  for (const [productID, entry] of state.entries) entry.purchase = newPurchase(productID);
  for (const [productID, o] of Object.entries(ordersOf(id))) {
    if (o.status !== 'confirmed') pollOrder(id, Number(productID), o.orderID);
  }
  renderAll();
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
  stats: (id) => (state.entries.get(id) || {}).stats || null,
  speedUp,
  onReset(id) {
    forgetProduct(id);
    const entry = state.entries.get(id);
    if (entry) {
      if (entry.purchase.orderID) stopOrderPoll(entry.purchase.orderID);
      entry.purchase = newPurchase(id);
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
});

// ---------------------------------------------------------------- start

document.addEventListener('visibilitychange', () => {
  if (document.hidden) {
    clearTimeout(refreshTimer);
    clearInterval(tickTimer);
    drawer.pause();
    return;
  }
  refresh();
  startTicking();
  resumeOrderPolls();
  drawer.resume();
});

showBuyer();
setupBuyerForm();
for (const [productID, o] of Object.entries(ordersOf(state.buyer))) {
  if (o.status !== 'confirmed') pollOrder(state.buyer, Number(productID), o.orderID);
}
refresh();
startTicking();
