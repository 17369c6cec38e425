// The demo drawer: the admin token (kept in sessionStorage), a product reset with any strategy of
// the server's catalog (strategies.js), and the stampede: the server sends N simulated buyers at
// every replica, the drawer follows the race from the stampede's progress and the product's
// exact audit (the admin stats), and once every buyer has answered and the order queue has
// drained (confirmed == reserved), it gives the verdict.

import * as api from './api.js';
import { setText, verdictClass } from './cards.js';
import { formatCount, formatFigure, formatRate, formatSeconds } from './format.js';
import { adminMessage } from './messages.js';
import { familyLabel, strategies, strategiesVersion, strategyInfo } from './strategies.js';

const TOKEN_KEY = 'seckill.adminToken';
const POLL_MS = 300;
const DRAIN_TIMEOUT_MS = 60000;

const $ = (id) => document.getElementById(id);

function session() {
  try {
    return window.sessionStorage;
  } catch {
    return null;
  }
}

/** Drawer is the demo/admin drawer. host gives it the page's products and hooks. */
export class Drawer {
  constructor(host) {
    this.host = host;
    this.dialog = $('admin');
    this.opener = $('admin-open');
    this.tokenInput = $('token-input');
    this.tokenState = $('token-state');
    this.forget = $('token-forget');
    this.product = $('demo-product');
    this.strategy = $('demo-strategy');
    this.strategySummary = $('demo-strategy-summary');
    /** the strategiesVersion() the strategy select was filled from */
    this.strategiesShown = -1;
    this.stock = $('demo-stock');
    this.buyers = $('demo-buyers');
    this.resetBtn = $('demo-reset');
    this.stampedeBtn = $('demo-stampede');
    this.error = $('demo-error');
    this.ok = $('demo-ok');
    this.race = $('race');
    this.raceStatus = $('race-status');
    this.raceBar = $('race-progress');
    this.raceVerdict = $('race-verdict');
    this.store = session();
    this.token = (this.store && this.store.getItem(TOKEN_KEY)) || '';
    this.memoryToken = '';
    /** the stampede being followed: {id, productID, buyers, started, progress, phase, timer} */
    this.current = null;
    this.paused = false;
    this.busy = false;
    this.selected = null;
    /** the product of the race shown (the last stampede's) */
    this.raceProduct = null;

    this.opener.addEventListener('click', () => this.open());
    $('admin-close').addEventListener('click', () => this.dialog.close());
    this.dialog.addEventListener('close', () => {
      document.body.classList.remove('drawer-open');
      this.opener.focus();
    });
    // A click on the backdrop (outside the panel) closes the drawer.
    this.dialog.addEventListener('click', (e) => {
      if (e.target === this.dialog) this.dialog.close();
    });
    $('token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.useToken(this.tokenInput.value.trim());
    });
    this.forget.addEventListener('click', () => {
      this.setToken('');
      this.tokenInput.focus();
    });
    this.product.addEventListener('change', () => this.selectProduct(Number(this.product.value), true));
    this.strategy.addEventListener('change', () => this.showStrategy());
    this.resetBtn.addEventListener('click', () => this.reset());
    $('demo-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.startStampede();
    });
    this.showToken();
    this.syncStrategies();
  }

  open() {
    document.body.classList.add('drawer-open');
    this.dialog.showModal();
    (this.currentToken() ? this.product : this.tokenInput).focus();
  }

  currentToken() {
    return this.token || this.memoryToken;
  }

  useToken(token) {
    if (!token) {
      this.tokenInput.setAttribute('aria-invalid', 'true');
      setText(this.tokenState, 'Enter the admin token first.');
      this.tokenInput.focus();
      return;
    }
    this.setToken(token);
    this.tokenInput.value = '';
    this.product.focus();
  }

  setToken(token) {
    this.token = token;
    this.memoryToken = '';
    if (this.store) {
      try {
        if (token) this.store.setItem(TOKEN_KEY, token);
        else this.store.removeItem(TOKEN_KEY);
      } catch {
        this.memoryToken = token; // storage refused: keep it for this page only
      }
    }
    this.showToken();
    this.host.tokenChanged();
  }

  showToken() {
    const has = Boolean(this.currentToken());
    this.tokenInput.removeAttribute('aria-invalid');
    setText(this.tokenState, has ? 'Token set for this tab.' : 'No token yet: the reset and the stampede need it.');
    this.tokenState.classList.toggle('good', has);
    this.forget.hidden = !has;
    $('token-row').hidden = has;
    $('token-hint').hidden = has;
    this.updateButtons();
  }

  updateButtons() {
    const ready = Boolean(this.currentToken()) && this.selected !== null && !this.busy;
    this.resetBtn.disabled = !ready;
    this.stampedeBtn.disabled = !ready;
  }

  /**
   * syncStrategies fills the strategy select from the catalog (strategies.js) when it has changed:
   * one group per family in catalog order, the unsafe strategies marked, the ones this server does
   * not serve disabled. The strategy chosen stays chosen.
   */
  syncStrategies() {
    if (this.strategiesShown === strategiesVersion()) return;
    this.strategiesShown = strategiesVersion();
    const keep = this.strategy.value;
    const groups = new Map();
    for (const s of strategies()) {
      let group = groups.get(s.family);
      if (!group) {
        group = document.createElement('optgroup');
        group.label = familyLabel(s.family);
        groups.set(s.family, group);
      }
      const o = document.createElement('option');
      o.value = s.name;
      o.textContent = `${s.name}${s.safe ? '' : ' · unsafe'}${s.served ? '' : ' (not served)'}`;
      o.disabled = !s.served;
      o.dataset.family = s.family;
      if (!s.safe) o.className = 'unsafe';
      group.append(o);
    }
    this.strategy.replaceChildren(...groups.values());
    const product = this.host.products().find((x) => x.id === this.selected);
    this.pickStrategy(keep || (product ? product.strategy : ''));
  }

  /**
   * pickStrategy selects the strategy called name, or else the first one served. A strategy the
   * list does not have (a product's, while the catalog is unread) is added as it is: a reset with
   * it keeps the product's strategy.
   */
  pickStrategy(name) {
    for (const x of this.strategy.querySelectorAll('option[data-extra]')) {
      if (x.value !== name) x.remove();
    }
    const options = [...this.strategy.options];
    let o = options.find((x) => x.value === name);
    if (!o && name) {
      o = document.createElement('option');
      o.value = name;
      o.textContent = name;
      o.dataset.extra = 'true';
      this.strategy.append(o);
    }
    o = o || options.find((x) => !x.disabled);
    if (o) this.strategy.value = o.value;
    this.showStrategy();
  }

  /** showStrategy shows the chosen strategy's summary under the select, and whether it is unsafe. */
  showStrategy() {
    const s = strategyInfo(this.strategy.value);
    const unsafe = Boolean(s && !s.safe);
    this.strategy.classList.toggle('unsafe', unsafe);
    this.strategySummary.classList.toggle('unsafe', unsafe);
    let text = s ? s.summary : '';
    if (s && !s.served) text = `${text} Not served here${s.safe ? '' : ' (unsafe strategies need SECKILL_ALLOW_UNSAFE_STRATEGIES)'}.`.trim();
    setText(this.strategySummary, text);
    this.strategySummary.hidden = !text;
  }

  /** productsChanged is called after every refresh of the page. */
  productsChanged(list) {
    this.syncStrategies();
    const keep = this.selected;
    const options = list.map((p) => {
      const o = document.createElement('option');
      o.value = String(p.id);
      o.textContent = `#${p.id} ${p.name} (${p.strategy})`;
      return o;
    });
    const sameList = options.length === this.product.options.length &&
      options.every((o, i) => o.value === this.product.options[i].value && o.textContent === this.product.options[i].textContent);
    if (!sameList) {
      this.product.replaceChildren(...options);
      if (keep !== null && list.some((p) => p.id === keep)) this.product.value = String(keep);
    }
    if (this.selected === null && list.length > 0) {
      // Preselect a safe, open demo sale with no purchases yet, if any: the nicest first race.
      const pick = list.find((p) => p.strategy === 'mysql') || list[0];
      this.product.value = String(pick.id);
      this.selectProduct(pick.id, true);
    } else if (this.selected !== null && !list.some((p) => p.id === this.selected)) {
      this.selected = null;
      if (list.length > 0) this.selectProduct(Number(this.product.value), true);
    }
    this.updateButtons();
    if (this.raceProduct !== null) this.statsChanged(this.raceProduct);
  }

  /** statsChanged is called when the page's figures of product id changed. */
  statsChanged(id) {
    if (id === this.raceProduct) this.renderStats(this.host.stats(id));
  }

  selectProduct(id, fillDefaults) {
    this.selected = Number.isFinite(id) ? id : null;
    const p = this.host.products().find((x) => x.id === this.selected);
    if (p && fillDefaults) {
      this.pickStrategy(p.strategy);
    }
    this.updateButtons();
  }

  readForm() {
    const stock = Number(this.stock.value);
    const buyers = Number(this.buyers.value);
    if (!Number.isInteger(stock) || stock < 0 || stock > 1000000) {
      return { error: 'Stock must be a whole number from 0 to 1,000,000.', field: this.stock };
    }
    if (!Number.isInteger(buyers) || buyers < 1 || buyers > 1000000) {
      return { error: 'Buyers must be a whole number from 1 up to the server’s limit (5,000 by default).', field: this.buyers };
    }
    if (!this.strategy.value) {
      return { error: 'Choose a strategy.', field: this.strategy };
    }
    return { id: this.selected, strategy: this.strategy.value, stock, buyers };
  }

  fail(err, field) {
    setText(this.ok, '');
    setText(this.error, typeof err === 'string' ? err : adminMessage(err));
    if (err && err.code === 'unauthorized') {
      this.setToken('');
      this.tokenInput.focus();
    } else if (field) {
      field.focus();
    }
  }

  setBusy(busy) {
    this.busy = busy;
    this.updateButtons();
    this.stampedeBtn.setAttribute('aria-busy', String(busy));
  }

  async reset() {
    const f = this.readForm();
    if (f.error) {
      this.fail(f.error, f.field);
      return;
    }
    setText(this.error, '');
    setText(this.ok, '');
    this.setBusy(true);
    try {
      const p = await api.resetProduct(this.currentToken(), f.id, f.stock, f.strategy);
      this.host.onReset(f.id);
      setText(this.ok, `Reset: “${p.name}” is on sale again with ${formatCount(p.stock)} units, strategy ${p.strategy}.`);
    } catch (err) {
      this.fail(err);
    } finally {
      this.setBusy(false);
    }
  }

  async startStampede() {
    const f = this.readForm();
    if (f.error) {
      this.fail(f.error, f.field);
      return;
    }
    setText(this.error, '');
    setText(this.ok, '');
    this.stopFollowing();
    this.setBusy(true);
    this.race.dataset.state = 'starting';
    this.raceVerdict.className = 'verdict verdict-big';
    setText(this.raceVerdict, '');
    let started;
    try {
      started = await api.startStampede(this.currentToken(), f.id, f.buyers, f.strategy, f.stock);
    } catch (err) {
      this.fail(err);
      this.setBusy(false);
      this.race.dataset.state = 'failed';
      return;
    }
    this.host.onReset(f.id);
    this.raceProduct = f.id;
    this.current = {
      id: started.stampede_id,
      productID: f.id,
      buyers: started.buyers,
      started: Date.now(),
      progress: started,
      phase: 'running',
      drainStarted: 0,
      timer: 0,
    };
    this.race.hidden = false;
    this.race.dataset.state = 'running';
    this.race.dataset.stampedeId = started.stampede_id;
    const where = started.targets.length === 1 ? 'one replica' : `${started.targets.length} replicas`;
    this.setRaceStatus(`${formatCount(started.buyers)} buyers rushing at ${where} (strategy ${f.strategy}, ${formatCount(f.stock)} units)…`);
    this.host.setVerdict(f.id, { ok: null, text: 'Stampede running…' });
    this.renderProgress(started);
    this.host.speedUp(60000);
    this.schedule(0);
  }

  setRaceStatus(text) {
    setText(this.raceStatus, text);
  }

  schedule(ms) {
    const cur = this.current;
    if (!cur || this.paused) return;
    clearTimeout(cur.timer);
    cur.timer = setTimeout(() => this.step(), ms);
  }

  stopFollowing() {
    if (this.current) clearTimeout(this.current.timer);
    this.current = null;
  }

  pause() {
    this.paused = true;
    if (this.current) clearTimeout(this.current.timer);
  }

  resume() {
    this.paused = false;
    this.schedule(0);
  }

  async step() {
    const cur = this.current;
    if (!cur) return;
    try {
      if (cur.phase === 'running') {
        const p = await api.stampede(this.currentToken(), cur.id);
        if (this.current !== cur) return;
        cur.progress = p;
        this.renderProgress(p);
        if (!p.running) {
          cur.phase = 'draining';
          cur.drainStarted = Date.now();
          const took = Date.parse(p.finished_at) - Date.parse(p.started_at);
          this.setRaceStatus(`All ${formatCount(p.sent)} buyers answered in ${formatSeconds(took)}. Waiting for the order queue to drain…`);
          this.host.setVerdict(cur.productID, { ok: null, text: 'Stampede over; waiting for the order queue…' });
        }
      } else if (cur.phase === 'draining') {
        const s = await api.adminStats(this.currentToken(), cur.productID);
        if (this.current !== cur) return;
        this.renderStats(s);
        if (s.confirmed_units === s.reserved) {
          this.finish(cur, s);
          return;
        }
        if (Date.now() - cur.drainStarted > DRAIN_TIMEOUT_MS) {
          this.finish(cur, s, true);
          return;
        }
      }
    } catch (err) {
      if (err.code === 'unauthorized' || err.code === 'not_found') {
        this.fail(err);
        this.setRaceStatus('Stopped following the stampede.');
        this.race.dataset.state = 'failed';
        this.stopFollowing();
        this.setBusy(false);
        return;
      }
      // Anything else is transient: keep following.
    }
    this.schedule(POLL_MS);
  }

  finish(cur, s, timedOut = false) {
    const p = cur.progress;
    let verdict;
    if (timedOut) {
      verdict = { ok: false, text: `Not drained after ${DRAIN_TIMEOUT_MS / 1000} s: ${formatCount(s.reserved)} reserved, ${formatCount(s.confirmed_units)} confirmed` };
    } else if (s.oversold > 0) {
      verdict = { ok: false, text: `OVERSOLD by ${formatCount(s.oversold)} units` };
    } else {
      verdict = { ok: true, text: `PASS — ${formatCount(s.reserved)} sold, 0 oversold` };
    }
    this.raceVerdict.className = `verdict verdict-big ${verdictClass(verdict)}`;
    setText(this.raceVerdict, verdict.text);
    const took = Date.parse(p.finished_at) - Date.parse(p.started_at);
    const where = p.targets.length === 1 ? 'one replica' : `${p.targets.length} replicas`;
    this.setRaceStatus(`In ${formatSeconds(took)} over ${where}, ${formatCount(p.accepted)} of ${formatCount(p.buyers)} buyers ` +
      `were told “accepted”; the database holds ${formatCount(s.reserved)} reserved and ` +
      `${formatCount(s.confirmed_units)} confirmed units of ${formatCount(s.initial_stock)}.`);
    this.host.setVerdict(cur.productID, verdict);
    this.race.dataset.state = 'done';
    this.current = null;
    this.setBusy(false);
  }

  renderProgress(p) {
    const done = p.accepted + p.sold_out + p.limit_reached + p.rejected_other + p.errors;
    this.raceBar.setAttribute('aria-valuemax', String(p.buyers));
    this.raceBar.setAttribute('aria-valuenow', String(done));
    this.raceBar.setAttribute('aria-valuetext', `${formatCount(done)} of ${formatCount(p.buyers)} buyers answered`);
    this.raceBar.firstElementChild.style.width = `${p.buyers > 0 ? (done / p.buyers) * 100 : 0}%`;
    for (const dd of this.race.querySelectorAll('[data-count]')) {
      const v = p[dd.dataset.count];
      setText(dd, formatCount(typeof v === 'number' ? v : 0));
    }
  }

  renderStats(s) {
    if (!s || this.race.hidden) return;
    const cells = {};
    for (const dd of $('race-stats').querySelectorAll('[data-stat]')) cells[dd.dataset.stat] = dd;
    setText(cells.stock, formatCount(s.stock));
    setText(cells.reserved, formatFigure(s.reserved));
    setText(cells.confirmed, formatFigure(s.confirmed_units));
    setText(cells.rps, s.rates_available ? formatRate(s.requests_per_sec) : 'n/a');
    setText(cells.aps, s.rates_available ? formatRate(s.accepted_per_sec) : 'n/a');
    setText(cells.oversold, formatFigure(s.oversold));
    cells.oversold.parentElement.classList.toggle('bad', s.oversold > 0);
  }
}
