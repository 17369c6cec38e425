// The product cards: built once per product from the <template>, then updated in place on every
// refresh and every clock tick. Everything shown comes from the API and is set with textContent
// or attributes, never as HTML.

import { serverNowLatest } from './clock.js';
import {
  formatAdmitRate, formatClock, formatCount, formatCountdown, formatFigure, formatPrice, formatRate, formatSpokenDuration, formatWait, shortID,
} from './format.js';
import { progress, queueOpensAt, waitingRoom } from './queue.js';
import { strategyInfo } from './strategies.js';

/** closedStatuses are the ends of an unpaid order: its unit goes back on sale. */
export const closedStatuses = new Set(['expired', 'cancelled']);

/**
 * payDeadline returns when the payment window of a confirmed order closes (ms since the epoch),
 * or null: the order is not awaiting payment, or the server has no payment window (no expires_at).
 */
export function payDeadline(pu) {
  if (pu.status !== 'confirmed' || !pu.order || !pu.order.expires_at) return null;
  const t = Date.parse(pu.order.expires_at);
  return Number.isNaN(t) ? null : t;
}

/** saleState says where a sale stands at server time now. */
export function saleState(product, now) {
  const start = Date.parse(product.sale_starts_at);
  const end = Date.parse(product.sale_ends_at);
  if (now < start) return { phase: 'upcoming', until: start - now };
  if (now >= end) return { phase: 'ended', until: 0 };
  if (product.stock <= 0) return { phase: 'soldout', until: end - now };
  return { phase: 'open', until: end - now };
}

const el = (root, sel) => root.querySelector(sel);

/** CardView is one product's card; actions are the page's buy(id), join(id) (a waiting room's line), pay(id) and cancel(id). */
export class CardView {
  constructor(template, product, actions) {
    this.id = product.id;
    const root = template.content.firstElementChild.cloneNode(true);
    this.root = root;
    root.dataset.productId = String(product.id);
    const titleID = `product-${product.id}-title`;
    root.setAttribute('aria-labelledby', titleID);
    this.title = el(root, '.card-title');
    this.title.id = titleID;
    this.title.tabIndex = -1; // focus lands here when the buy button it follows gets disabled
    this.badge = el(root, '.badge');
    this.pill = el(root, '[data-role=state]');
    this.note = el(root, '.strategy-note');
    this.price = el(root, '.price');
    this.limit = el(root, '.limit');
    this.bar = el(root, '.stock-bar');
    this.fill = el(root, '.stock-fill');
    this.stockText = el(root, '.stock-text');
    this.countdown = el(root, '.countdown');
    this.button = el(root, '.btn-buy');
    this.buttonAction = 'buy';
    this.admissionNote = el(root, '.admission-note');
    this.queue = el(root, '.queue');
    this.queueLine = el(root, '.queue-line');
    this.queueBar = el(root, '.queue-bar');
    this.queueFill = el(root, '.queue-fill');
    this.queueNote = el(root, '.queue-note');
    this.queueAnnounce = el(root, '.queue-announce');
    this.order = el(root, '.order');
    this.order.tabIndex = -1; // focus lands here when the pay buttons it follows go away
    this.payBox = el(root, '.pay');
    this.payCountdown = el(root, '.pay-countdown');
    this.payButton = el(root, '.btn-pay');
    this.cancelButton = el(root, '.btn-cancel-order');
    this.cancelConfirm = el(root, '.cancel-confirm');
    this.cancelYes = el(root, '.btn-cancel-yes');
    this.cancelNo = el(root, '.btn-cancel-no');
    this.asking = false; // the "cancel the order?" question is open
    this.error = el(root, '.error');
    this.live = el(root, '.live');
    this.verdict = el(root, '.verdict');
    this.sparkCaption = el(root, '.spark-caption');
    this.stats = {};
    for (const dd of root.querySelectorAll('[data-stat]')) this.stats[dd.dataset.stat] = dd;
    this.oversoldCell = el(root, '.oversold');
    this.liveOrders = el(root, '.live-orders');
    this.audit = el(root, '.audit');
    this.auditNote = el(root, '.audit-note');

    const liveTitle = el(root, '.live-title');
    liveTitle.id = `product-${product.id}-live`;
    this.live.setAttribute('aria-labelledby', liveTitle.id);
    this.bar.setAttribute('aria-label', 'Units left');
    const queueTitle = el(root, '.queue-title');
    queueTitle.id = `product-${product.id}-queue`;
    this.queue.setAttribute('aria-labelledby', queueTitle.id);
    this.queueBar.setAttribute('aria-label', 'Your way to the front of the line');
    this.button.setAttribute('aria-describedby', `product-${product.id}-countdown`);
    this.countdown.id = `product-${product.id}-countdown`;
    this.payCountdown.id = `product-${product.id}-pay-countdown`;
    this.payButton.setAttribute('aria-describedby', this.payCountdown.id);
    const question = el(root, '.cancel-question');
    question.id = `product-${product.id}-cancel-question`;
    this.cancelConfirm.setAttribute('role', 'group');
    this.cancelConfirm.setAttribute('aria-labelledby', question.id);

    this.spark = el(root, '.spark');
    this.sparkCols = [];
    for (let i = 0; i < 30; i++) {
      const col = document.createElement('span');
      col.className = 'spark-col';
      const req = document.createElement('span');
      req.className = 'spark-req';
      const acc = document.createElement('span');
      acc.className = 'spark-acc';
      col.append(req, acc);
      this.spark.append(col);
      this.sparkCols.push({ req, acc });
    }
    this.button.addEventListener('click', () => (this.buttonAction === 'join' ? actions.join(this.id) : actions.buy(this.id)));
    this.payButton.addEventListener('click', () => actions.pay(this.id));
    this.cancelButton.addEventListener('click', () => {
      this.asking = true;
      this.renderPay(this.lastEntry);
      this.cancelNo.focus();
    });
    this.cancelNo.addEventListener('click', () => {
      this.asking = false;
      this.renderPay(this.lastEntry);
      this.cancelButton.focus();
    });
    this.cancelYes.addEventListener('click', () => {
      this.asking = false;
      actions.cancel(this.id);
    });
    this.root.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && this.asking) {
        this.asking = false;
        this.renderPay(this.lastEntry);
        this.cancelButton.focus();
      }
    });
    this.lastPhase = null;
    this.lastEntry = null;
  }

  /** update renders entry ({product, stats, audit, purchase, line, verdict}) at server time now. */
  update(entry, now) {
    const p = entry.product;
    const st = saleState(p, now);
    const strategy = String(p.strategy);
    this.root.dataset.phase = st.phase;
    // What the strategy is comes from the catalog (strategies.js); one it does not know is shown
    // by its name alone.
    const info = strategyInfo(strategy);
    const unsafe = info !== null && !info.safe;
    const family = info ? info.family : 'other';
    this.root.dataset.strategy = strategy;
    this.root.dataset.family = family;
    setText(this.title, p.name);
    setText(this.badge, unsafe ? `${strategy} · unsafe` : strategy);
    this.badge.className = `badge badge-family-${family}${unsafe ? ' badge-unsafe' : ''}`;
    const note = info ? info.summary : '';
    setText(this.note, note);
    if (this.note.hidden !== !note) this.note.hidden = !note;
    setText(this.price, formatPrice(p.price_cents));
    setText(this.limit, p.per_user_limit === 1 ? 'one per buyer' : `up to ${p.per_user_limit} per buyer`);

    const pills = { upcoming: 'Upcoming', open: 'On sale', soldout: 'Sold out', ended: 'Ended' };
    setText(this.pill, pills[st.phase]);
    this.pill.className = `pill pill-${st.phase}`;

    const initial = Math.max(0, p.initial_stock);
    const left = Math.max(0, p.stock);
    const pct = initial > 0 ? Math.min(100, (left / initial) * 100) : 0;
    this.fill.style.width = `${pct}%`;
    this.fill.classList.toggle('low', pct > 0 && pct <= 20);
    this.bar.setAttribute('aria-valuemax', String(initial));
    this.bar.setAttribute('aria-valuenow', String(left));
    const stockLine = `${formatCount(left)} of ${formatCount(initial)} left`;
    this.bar.setAttribute('aria-valuetext', stockLine);
    setText(this.stockText, stockLine);

    const room = waitingRoom(p);
    const lineOpens = room ? queueOpensAt(p) : NaN;
    const rule = room ? `Waiting room · lets in ${formatAdmitRate(Number(p.admission.admit_rate))}` : '';
    setText(this.admissionNote, rule);
    if (this.admissionNote.hidden !== !rule) this.admissionNote.hidden = !rule;
    switch (st.phase) {
      case 'upcoming':
        if (room && now < lineOpens) {
          setText(this.countdown, `Line opens at ${formatClock(lineOpens)} · sale at ${formatClock(Date.parse(p.sale_starts_at))}`);
          this.countdown.setAttribute('aria-label', `The line opens in ${formatSpokenDuration(lineOpens - now)}`);
        } else if (room) {
          setText(this.countdown, `Line open · sale opens at ${formatClock(Date.parse(p.sale_starts_at))}`);
          this.countdown.setAttribute('aria-label', `The line is open. The sale opens in ${formatSpokenDuration(st.until)}`);
        } else {
          setText(this.countdown, `Opens at ${formatClock(Date.parse(p.sale_starts_at))}`);
          this.countdown.setAttribute('aria-label', `Opens in ${formatSpokenDuration(st.until)}`);
        }
        break;
      case 'ended':
        setText(this.countdown, 'This sale has ended');
        this.countdown.removeAttribute('aria-label');
        break;
      case 'soldout':
        setText(this.countdown, `Sold out · sale ends in ${formatCountdown(st.until)}`);
        this.countdown.setAttribute('aria-label', `Sold out. The sale ends in ${formatSpokenDuration(st.until)}`);
        break;
      default:
        setText(this.countdown, `Ends in ${formatCountdown(st.until)}`);
        this.countdown.setAttribute('aria-label', `Ends in ${formatSpokenDuration(st.until)}`);
    }

    this.lastEntry = entry;
    if (room && !entry.purchase.orderID) this.renderLineButton(entry, st, now, lineOpens);
    else this.renderButton(entry, st);
    this.renderQueue(entry, room);
    this.renderOrder(entry);
    this.renderPay(entry);
    const line = room && !entry.purchase.orderID ? entry.line : null;
    setText(this.error, entry.purchase.error || entry.purchase.payError || (line && line.error) || '');
    this.renderLive(entry);
    this.lastPhase = st.phase;
  }

  renderButton(entry, st) {
    this.buttonAction = 'buy';
    const pu = entry.purchase;
    let label;
    let disabled = true;
    if (pu.phase === 'sending') {
      label = 'Buying…';
    } else if (pu.orderID) {
      label = {
        queued: 'Bought · confirming…', expired: 'Not paid in time', cancelled: 'Order cancelled', refused: 'Order refused',
      }[pu.status] || 'Bought';
    } else if (st.phase === 'upcoming') {
      label = `Opens in ${formatCountdown(st.until)}`;
    } else if (st.phase === 'ended') {
      label = 'Sale ended';
    } else if (st.phase === 'soldout') {
      label = 'Sold out';
    } else {
      label = pu.retryKey ? 'Try again' : 'Buy now';
      disabled = false;
    }
    setText(this.button, label);
    this.button.disabled = disabled;
    this.button.setAttribute('aria-busy', String(pu.phase === 'sending'));
  }

  /**
   * renderLineButton is the button of a waiting-room sale the buyer has no order of: join the line
   * (once it opens; again after being skipped or a turn over), wait, then buy with the pass.
   */
  renderLineButton(entry, st, now, lineOpens) {
    const pu = entry.purchase;
    const line = entry.line;
    const state = line ? line.state : 'idle';
    let label;
    let action = 'join';
    let disabled = true;
    if (pu.phase === 'sending') {
      label = 'Buying…';
      action = 'buy';
    } else if (st.phase === 'ended' || state === 'ended') {
      label = 'Sale ended';
    } else if (st.phase === 'soldout' || state === 'sold_out') {
      label = 'Sold out';
    } else if (state === 'admitted' && line.pass(serverNowLatest())) {
      action = 'buy';
      if (st.phase === 'upcoming') {
        label = `Opens in ${formatCountdown(st.until)}`;
      } else {
        label = pu.retryKey ? 'Try again' : 'Buy now';
        disabled = false;
      }
    } else if (state === 'joining') {
      label = 'Joining the line…';
    } else if (state === 'pre_queue' || state === 'waiting' || state === 'admitted') {
      label = 'Waiting for your turn…';
    } else if (!(now >= lineOpens)) {
      label = `Line opens in ${formatCountdown(lineOpens - now)}`;
    } else {
      label = state === 'abandoned' || state === 'session_over' ? 'Join the line again' : 'Join the line';
      disabled = false;
    }
    this.buttonAction = action;
    setText(this.button, label);
    this.button.disabled = disabled;
    this.button.setAttribute('aria-busy', String(pu.phase === 'sending' || state === 'joining'));
  }

  /** renderQueue shows the buyer's place in a waiting-room sale's line: hidden when not in it. */
  renderQueue(entry, room) {
    const line = entry.line;
    const t = line && line.ticket;
    const show = room && !entry.purchase.orderID && line !== null && (t !== null || line.closed !== '');
    if (this.queue.hidden === show) this.queue.hidden = !show;
    if (!show) {
      delete this.queue.dataset.state;
      return;
    }
    const state = line.state;
    const p = entry.product;
    this.queue.dataset.state = state;
    this.queue.dataset.ticket = t ? String(t.ticket) : '';
    this.queue.dataset.position = t && (state === 'waiting' || state === 'pre_queue') && t.ticket > 0 ? String(t.ahead + 1) : '';
    this.queue.dataset.polling = String(line.polling);
    let text = '';
    let note = '';
    let announce = '';
    let urgent = false;
    const place = t ? formatCount(t.ahead + 1) : '';
    const eta = t && typeof t.eta_seconds === 'number' ? ` — about ${formatWait(t.eta_seconds)}` : '';
    switch (state) {
      case 'pre_queue':
        if (t.ticket > 0) {
          text = `You are number ${place} in line${eta}`;
          note = `The line starts moving when the sale opens, at ${formatClock(Date.parse(p.sale_starts_at))}. Keep this page open: it keeps your place.`;
          announce = `You are number ${place} in line.`;
        } else {
          text = 'You are in the line';
          note = `When the sale opens, at ${formatClock(Date.parse(p.sale_starts_at))}, the order of the people who joined before is drawn at random: then you learn your number. Keep this page open.`;
          announce = 'You are in the line. Your number comes when the sale opens.';
        }
        break;
      case 'waiting':
        text = `You are number ${place} in line${eta}`;
        note = t.ahead > 0
          ? `${formatCount(t.ahead)} ${t.ahead === 1 ? 'person' : 'people'} ahead of you. Keep this page open: it keeps your place, and the Buy button opens when it is your turn.`
          : 'You are next: the Buy button opens when it is your turn.';
        announce = `You are number ${place} in line.`;
        break;
      case 'admitted': {
        const held = line.pass(serverNowLatest());
        if (held) {
          const left = held.expires - serverNowLatest();
          text = `It's your turn — buy within ${left < 100000 ? `${Math.ceil(left / 1000)} s` : formatCountdown(left)}`;
          urgent = left <= 15000;
          note = 'The Buy button now shows the shop your pass to this sale. When the time runs out, your turn goes to the next in line.';
        } else {
          text = 'Your turn is ending…';
        }
        announce = 'It is your turn: the Buy button is open.';
        break;
      }
      case 'sold_out':
        text = 'Sold out — the line is closed';
        note = 'Every unit was taken before your turn came. Nothing was bought, and nothing will be charged.';
        announce = 'Sold out: the line is closed.';
        break;
      case 'ended':
        text = 'The sale has ended — the line is closed';
        announce = text;
        break;
      case 'abandoned':
        text = 'The line went on without you';
        note = 'Your turn came while this page was not answering, so it was skipped. Join again to get a new place, at the back of the line.';
        announce = text;
        break;
      case 'session_over':
        text = 'Your turn is over';
        note = 'You did not buy within your turn. Join again to get another turn, at the back of the line.';
        announce = text;
        break;
      default:
        text = 'You are in the line';
    }
    if (line.busy) note = line.busy;
    setText(this.queueLine, text);
    this.queueLine.classList.toggle('urgent', urgent);
    setText(this.queueNote, note);
    setText(this.queueAnnounce, announce);
    const pct = Math.round(progress(line) * 100);
    this.queueFill.style.width = `${pct}%`;
    this.queueBar.setAttribute('aria-valuenow', String(pct));
    this.queueBar.setAttribute('aria-valuetext', t && t.ticket > 0 && t.state !== 'admitted'
      ? `${formatCount(t.ahead)} ahead of you` : state === 'admitted' ? 'your turn' : 'not drawn yet');
  }

  renderOrder(entry) {
    const pu = entry.purchase;
    if (!pu.orderID) {
      if (this.order.firstChild) this.order.replaceChildren();
      delete this.order.dataset.key;
      return;
    }
    const o = pu.order || {};
    const status = ORDER_STATUS[pu.status] ? pu.status : 'queued';
    const lifecycle = Boolean(o.expires_at) || (status !== 'queued' && status !== 'confirmed');
    const returned = o.returned === true;
    const key = `${pu.orderID}/${status}/${lifecycle}/${returned}/${o.payment_id || ''}`;
    if (this.order.dataset.key === key) return;
    this.order.dataset.key = key;
    const line = document.createElement('p');
    line.className = 'order-line';
    const code = document.createElement('code');
    code.textContent = shortID(pu.orderID);
    code.title = pu.orderID;
    const pill = document.createElement('span');
    pill.className = `order-status status-${status}`;
    pill.dataset.status = status;
    pill.textContent = ORDER_STATUS[status];
    line.append('Your order ', code, ' is ', pill);
    const note = document.createElement('p');
    note.className = 'order-note';
    switch (status) {
      case 'queued':
        line.append('…');
        break;
      case 'confirmed':
        line.append(lifecycle ? ': the unit is yours once you pay.' : '.');
        break;
      case 'paying':
        line.append('…');
        note.textContent = 'The payment is at the payment provider; this updates by itself.';
        break;
      case 'paid': {
        line.append('.');
        if (o.payment_id) {
          const payment = document.createElement('code');
          payment.className = 'payment-id';
          payment.textContent = String(o.payment_id);
          note.append('Payment ', payment, ': the unit is yours.');
        } else {
          note.textContent = 'The unit is yours.';
        }
        break;
      }
      case 'refused': // accepted, then refused when it was recorded: the server says why
        line.append('.');
        note.textContent = o.message || 'It was accepted, then refused when it was recorded. Nothing will be charged.';
        break;
      default: // expired, cancelled
        line.append('.');
        note.textContent = `${status === 'expired' ? 'It was not paid in time. ' : ''}Nothing was charged; ${returned
          ? 'the unit went back on sale.' : 'the unit is going back on sale…'}`;
        note.dataset.returned = String(returned);
    }

    const steps = document.createElement('ol');
    steps.className = 'steps';
    steps.setAttribute('aria-hidden', 'true');
    const reached = { queued: 1, confirmed: 2, paying: 2, paid: 3, expired: 3, cancelled: 3, refused: 2 }[status];
    // A refused order never was confirmed: its steps end where it was refused.
    const names = ['reserved', 'queued', status === 'refused' ? 'refused' : 'confirmed'];
    if (lifecycle && status !== 'refused') names.push(closedStatuses.has(status) ? status : 'paid');
    names.forEach((name, i) => {
      const li = document.createElement('li');
      li.textContent = name;
      if (i <= reached) li.className = closedStatuses.has(name) || name === 'refused' ? 'done closed' : 'done';
      steps.append(li);
    });
    this.order.replaceChildren(...(note.firstChild ? [line, note, steps] : [line, steps]));
  }

  /** renderPay shows the Pay and Cancel buttons and the payment countdown of a confirmed order. */
  renderPay(entry) {
    if (!entry) return;
    const pu = entry.purchase;
    const deadline = payDeadline(pu);
    const show = deadline !== null;
    if (this.payBox.hidden === show) this.payBox.hidden = !show;
    if (!show) {
      this.asking = false;
      return;
    }
    const left = deadline - serverNowLatest();
    const busy = Boolean(pu.payPhase || pu.cancelPhase);
    if (left > 0) {
      setText(this.payCountdown, `Pay within ${formatCountdown(left)}`);
      this.payCountdown.setAttribute('aria-label', `Pay within ${formatSpokenDuration(left)}`);
    } else {
      setText(this.payCountdown, 'The payment window has closed · checking with the shop…');
      this.payCountdown.removeAttribute('aria-label');
    }
    this.payCountdown.classList.toggle('urgent', left <= 60000);
    let label = `Pay ${formatPrice(entry.product.price_cents * ((pu.order && pu.order.quantity) || 1))}`;
    if (pu.payPhase) label = 'Paying…';
    else if (pu.payKey) label = 'Try paying again';
    else if (pu.declined) label = 'Pay again';
    setText(this.payButton, label);
    this.payButton.disabled = busy || left <= 0;
    this.payButton.setAttribute('aria-busy', String(Boolean(pu.payPhase)));
    setText(this.cancelButton, pu.cancelPhase ? 'Cancelling…' : 'Cancel order');
    this.cancelButton.disabled = busy || left <= 0;
    const asking = this.asking && !busy && left > 0;
    if (this.cancelConfirm.hidden === asking) this.cancelConfirm.hidden = !asking;
    if (this.cancelButton.hidden !== asking) this.cancelButton.hidden = asking;
  }

  renderLive(entry) {
    this.renderAudit(entry.audit);
    const s = entry.stats;
    if (!s) return;
    setText(this.stats.stock, formatCount(s.stock));
    setText(this.stats.rps, s.rates_available ? formatRate(s.requests_per_sec) : 'n/a');
    setText(this.stats.aps, s.rates_available ? formatRate(s.accepted_per_sec) : 'n/a');

    const series = s.per_second;
    if (series && Array.isArray(series.requests)) {
      const req = series.requests.slice(-this.sparkCols.length);
      const acc = (series.accepted || []).slice(-this.sparkCols.length);
      const peak = Math.max(1, ...req);
      const offset = this.sparkCols.length - req.length;
      this.sparkCols.forEach((col, i) => {
        const r = i >= offset ? req[i - offset] : 0;
        const a = i >= offset ? acc[i - offset] || 0 : 0;
        col.req.style.height = `${(r / peak) * 100}%`;
        col.acc.style.height = `${(a / peak) * 100}%`;
      });
      const max = Math.max(0, ...req);
      setText(this.sparkCaption, max > 0
        ? `Requests (light) and accepted (dark) per second, last ${req.length} s · peak ${formatCount(max)}/s`
        : `No purchase attempts in the last ${req.length} s`);
    } else {
      for (const col of this.sparkCols) {
        col.req.style.height = '0%';
        col.acc.style.height = '0%';
      }
      setText(this.sparkCaption, 'Live rates unavailable right now (the counters’ Redis does not answer).');
    }

    const v = entry.verdict;
    setText(this.verdict, v ? v.text : '');
    this.verdict.className = `verdict ${verdictClass(v)}`;
  }

  /**
   * renderAudit shows the exact audit (a, the admin stats: {} until their first answer) in a tab
   * with the admin token; without it (a null), the cells are hidden and a note says whose they are.
   */
  renderAudit(a) {
    if (this.audit.hidden === Boolean(a)) this.audit.hidden = !a;
    if (this.auditNote.hidden !== Boolean(a)) this.auditNote.hidden = Boolean(a);
    if (!a) return;
    setText(this.stats.reserved, formatFigure(a.reserved));
    setText(this.stats.confirmed, formatFigure(a.confirmed_units));
    setText(this.stats.oversold, formatFigure(a.oversold));
    this.oversoldCell.classList.toggle('bad', a.oversold > 0);
    this.oversoldCell.classList.toggle('good', a.oversold === 0);
    // The order lifecycle's counters, from a server with the payment window; an older one has none.
    const lifecycle = Object.keys(LIFECYCLE_STATS).some((k) => typeof a[k] === 'number');
    if (this.liveOrders.hidden === lifecycle) this.liveOrders.hidden = !lifecycle;
    if (lifecycle) {
      for (const [field, cell] of Object.entries(LIFECYCLE_STATS)) setText(this.stats[cell], formatFigure(a[field]));
    }
  }
}

// What an order's status is called on its card.
const ORDER_STATUS = {
  queued: 'queued', confirmed: 'confirmed', paying: 'being paid', paid: 'paid', expired: 'expired', cancelled: 'cancelled',
  refused: 'refused',
};

// The audit's fields of the order lifecycle and the live panel's cells that show them.
const LIFECYCLE_STATS = {
  awaiting_payment_units: 'awaiting', paid_units: 'paid', expired_units: 'expired', cancelled_units: 'cancelled', returned_units: 'returned',
};

/** verdictClass styles a verdict: {ok: true} passes, {ok: false} fails, {ok: null} is pending. */
export function verdictClass(v) {
  if (!v) return '';
  if (v.ok === true) return 'pass';
  if (v.ok === false) return 'fail';
  return 'pending';
}

/** setText changes an element's text only when it differs, so that live regions stay quiet. */
export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}
