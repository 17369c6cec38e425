// The product cards: built once per product from the <template>, then updated in place on every
// refresh and every clock tick. Everything shown comes from the API and is set with textContent
// or attributes, never as HTML.

import { formatClock, formatCount, formatCountdown, formatPrice, formatRate, formatSpokenDuration, shortID } from './format.js';

const STRATEGY_NOTES = {
  mysql: 'Stock deducted by one conditional UPDATE on the product’s MySQL row.',
  redis: 'Stock deducted under a Redis lock, fenced by a token.',
  zk: 'Stock deducted under a ZooKeeper lock, fenced by a token.',
  'redis-lua': 'Stock pre-deducted in Redis by one Lua script; written to MySQL right after.',
  none: 'No lock and no condition: oversells under load, on purpose.',
};

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

/** CardView is one product's card. */
export class CardView {
  constructor(template, product, onBuy) {
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
    this.order = el(root, '.order');
    this.error = el(root, '.error');
    this.live = el(root, '.live');
    this.verdict = el(root, '.verdict');
    this.sparkCaption = el(root, '.spark-caption');
    this.stats = {};
    for (const dd of root.querySelectorAll('[data-stat]')) this.stats[dd.dataset.stat] = dd;
    this.oversoldCell = el(root, '.oversold');

    const liveTitle = el(root, '.live-title');
    liveTitle.id = `product-${product.id}-live`;
    this.live.setAttribute('aria-labelledby', liveTitle.id);
    this.bar.setAttribute('aria-label', 'Units left');
    this.button.setAttribute('aria-describedby', `product-${product.id}-countdown`);
    this.countdown.id = `product-${product.id}-countdown`;

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
    this.button.addEventListener('click', () => onBuy(this.id));
    this.lastPhase = null;
  }

  /** update renders entry ({product, stats, purchase, verdict}) at server time now. */
  update(entry, now) {
    const p = entry.product;
    const st = saleState(p, now);
    const strategy = String(p.strategy);
    this.root.dataset.phase = st.phase;
    this.root.dataset.strategy = strategy;
    setText(this.title, p.name);
    setText(this.badge, strategy === 'none' ? 'none · unsafe' : strategy);
    this.badge.className = `badge badge-${/^[a-z][a-z-]*$/.test(strategy) ? strategy : 'other'}`;
    setText(this.note, STRATEGY_NOTES[strategy] || '');
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

    switch (st.phase) {
      case 'upcoming':
        setText(this.countdown, `Opens at ${formatClock(Date.parse(p.sale_starts_at))}`);
        this.countdown.setAttribute('aria-label', `Opens in ${formatSpokenDuration(st.until)}`);
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

    this.renderButton(entry, st);
    this.renderOrder(entry);
    setText(this.error, entry.purchase.error || '');
    this.renderLive(entry);
    this.lastPhase = st.phase;
  }

  renderButton(entry, st) {
    const pu = entry.purchase;
    let label;
    let disabled = true;
    if (pu.phase === 'sending') {
      label = 'Buying…';
    } else if (pu.orderID) {
      label = pu.status === 'confirmed' ? 'Bought' : 'Bought · confirming…';
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

  renderOrder(entry) {
    const pu = entry.purchase;
    if (!pu.orderID) {
      if (this.order.firstChild) this.order.replaceChildren();
      return;
    }
    const key = `${pu.orderID}/${pu.status}`;
    if (this.order.dataset.key === key) return;
    this.order.dataset.key = key;
    const line = document.createElement('p');
    line.className = 'order-line';
    const code = document.createElement('code');
    code.textContent = shortID(pu.orderID);
    code.title = pu.orderID;
    const status = document.createElement('span');
    status.className = `order-status status-${pu.status === 'confirmed' ? 'confirmed' : 'queued'}`;
    status.dataset.status = pu.status;
    status.textContent = pu.status === 'confirmed' ? 'confirmed' : 'queued';
    line.append('Your order ', code, ' is ', status, pu.status === 'confirmed' ? '.' : '…');

    const steps = document.createElement('ol');
    steps.className = 'steps';
    steps.setAttribute('aria-hidden', 'true');
    for (const [name, done] of [['reserved', true], ['queued', true], ['confirmed', pu.status === 'confirmed']]) {
      const li = document.createElement('li');
      li.textContent = name;
      if (done) li.className = 'done';
      steps.append(li);
    }
    this.order.replaceChildren(line, steps);
  }

  renderLive(entry) {
    const s = entry.stats;
    if (!s) return;
    setText(this.stats.stock, formatCount(s.stock));
    setText(this.stats.reserved, formatCount(s.reserved));
    setText(this.stats.confirmed, formatCount(s.confirmed_units));
    setText(this.stats.rps, s.rates_available ? formatRate(s.requests_per_sec) : 'n/a');
    setText(this.stats.aps, s.rates_available ? formatRate(s.accepted_per_sec) : 'n/a');
    setText(this.stats.oversold, formatCount(s.oversold));
    this.oversoldCell.classList.toggle('bad', s.oversold > 0);
    this.oversoldCell.classList.toggle('good', s.oversold === 0);

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
}

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
