// A waiting-room sale's line, as one buyer follows it (docs/api.md, "The queue"): join (POST,
// idempotent per buyer, so a reload keeps the place), then poll the ticket (GET, the heartbeat
// that keeps the buyer from being skipped as abandoned) at the cadence the server asks for:
// poll_after_ms is half the estimated wait, so the polls come faster near the front. A refusal's
// Retry-After (429, 503) is honoured; no answer backs off. Once admitted the buyer holds a signed
// pass until the session ends, and the page polls only to learn that it ended. Sold out or ended,
// the line is closed: no more polls. The sale's live stream closes it at once (saleChanged),
// without waiting for the next poll.
//
// A line keeps polling while the tab is hidden: a buyer who looks elsewhere while waiting keeps
// their place (a browser may slow a hidden tab's timers down, to once a minute after five minutes).

import * as api from './api.js';
import { rememberQueue, tokenOf } from './identity.js';
import { queueMessage } from './messages.js';

// The bounds of the poll cadence: the server's (waitroom.MinPoll, MaxPoll), should an answer lack it.
const MIN_POLL_MS = 500;
const MAX_POLL_MS = 5000;
// No answer: try again after 1, 2, 4, then every 5 s.
const BACKOFF_MS = [1000, 2000, 4000, 5000];
// The states a buyer is in the line in: polled until admitted.
const IN_LINE = new Set(['pre_queue', 'waiting']);
// The states a join is the only way back from (the line went on without the buyer).
const OUT_OF_LINE = new Set(['abandoned', 'session_over']);

/** waitingRoom reports whether a product admits its buyers through a waiting room. */
export function waitingRoom(product) {
  return Boolean(product && product.admission && product.admission.mode === 'waiting_room');
}

/** queueOpensAt returns when a waiting-room sale's line opens for joining (ms), or NaN. */
export function queueOpensAt(product) {
  const a = product && product.admission;
  return Date.parse((a && a.queue_opens_at) || product.sale_starts_at);
}

/**
 * Line is one buyer's place in one sale's line. Its fields are what the card shows: ticket (the
 * last answer of the queue, or null), joining, closed ("" while the line is open to the buyer,
 * "sold_out" or "ended"), error (a refusal, in words), busy (a transient problem while
 * following: the place is kept), startAhead (how many were ahead when the page first saw the
 * ticket: where the progress bar starts) and polling (a poll is scheduled). changed() is called
 * after every change.
 */
export class Line {
  constructor(productID, buyer, changed, remembered = null) {
    this.productID = productID;
    this.buyer = buyer;
    this.changed = changed;
    this.ticket = null;
    this.joining = false;
    this.closed = '';
    this.error = '';
    this.busy = '';
    this.sale = remembered ? remembered.sale : '';
    this.knownTicket = remembered ? remembered.ticket : 0;
    this.startAhead = remembered ? remembered.startAhead : 0;
    this.rejoined = false;
    // What the sale's stream said last: a ticket that comes later (a reload's first poll, one
    // sent before the news) cannot reopen a line the stream closed.
    this.saleSoldOut = false;
    this.saleEnded = false;
    this.polling = false;
    this.timer = 0;
    this.failures = 0;
    this.stopped = false;
  }

  /** state is where the buyer stands: "idle" (not in the line), a ticket's state, or the line's closing. */
  get state() {
    if (this.closed) return this.closed;
    if (this.joining && !this.ticket) return 'joining';
    return this.ticket ? this.ticket.state : 'idle';
  }

  /** pass returns the admission pass and its expiry (ms), or null: not admitted, or no pass (its last second). */
  pass(now) {
    const t = this.ticket;
    if (this.closed || !t || t.state !== 'admitted' || !t.pass) return null;
    const expires = Date.parse(t.pass_expires_at);
    if (Number.isNaN(expires) || expires <= now) return null;
    return { pass: t.pass, expires };
  }

  /** join joins the line (again after being skipped or a session over: at the back). */
  async join() {
    if (this.joining || this.stopped) return;
    this.joining = true;
    this.error = '';
    this.busy = '';
    this.closed = '';
    this.changed();
    try {
      this.apply(await api.joinQueue(this.productID, this.buyer, tokenOf(this.buyer) || undefined));
    } catch (err) {
      this.refused(err, true);
    } finally {
      this.joining = false;
      this.changed();
    }
  }

  /** resume asks for the ticket remembered before a reload; the line then follows it. */
  resume() {
    this.schedule(0);
  }

  /** pollNow asks for the ticket at once: a purchase's pass was refused, or the sale changed. */
  pollNow() {
    if (this.closed === 'ended') return;
    this.schedule(0);
  }

  /**
   * saleChanged is the sale's live stream (or a list polled): sold out or ended closes the line at
   * once, with no poll; units back in stock reopen it (the buyer kept their place).
   */
  saleChanged(product) {
    const soldOut = product.state === 'sold_out' || product.stock <= 0;
    const wasSoldOut = this.saleSoldOut;
    this.saleSoldOut = soldOut;
    this.saleEnded = product.state === 'ended';
    if (this.stopped || this.ticket === null) return;
    if (this.saleEnded) {
      this.close('ended');
    } else if (soldOut) {
      this.close('sold_out');
    } else if (wasSoldOut && this.closed === 'sold_out') {
      // Units came back: the room gives them to the next in line, who may be this buyer. Asked
      // once per return, not at every figure the stream sends while the room still says sold out.
      this.closed = '';
      this.changed();
      this.schedule(0);
    }
  }

  /** done stops following the line: the buyer bought (the order is followed instead), or left. */
  done() {
    this.stop();
    rememberQueue(this.buyer, this.productID, null);
  }

  /** stop cancels the next poll, for good. */
  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.polling = false;
  }

  close(reason) {
    clearTimeout(this.timer);
    this.polling = false;
    const was = this.closed;
    this.closed = reason;
    this.busy = '';
    if (was !== reason) this.changed();
  }

  schedule(ms) {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.polling = true;
    this.timer = setTimeout(() => this.poll(), ms);
  }

  async poll() {
    this.polling = false;
    if (this.stopped || this.joining) return;
    try {
      const t = await api.queueTicket(this.productID, this.buyer, tokenOf(this.buyer) || undefined);
      if (this.stopped) return;
      this.apply(t);
    } catch (err) {
      if (!this.stopped) this.refused(err, false);
    }
    this.changed();
  }

  /** apply records a ticket and schedules what follows it. */
  apply(t) {
    this.failures = 0;
    this.busy = '';
    this.error = '';
    if (t.state === 'not_joined') {
      // Remembered here but unknown there: the room lost it (its visitors join again), or the sale
      // was reset (a new, empty line: the buyer chooses to join it).
      const lost = this.sale !== '' && t.sale === this.sale && !this.rejoined;
      this.forget();
      if (lost) {
        this.rejoined = true;
        this.join();
      }
      return;
    }
    // The same place as before (this page's, or the one remembered before a reload): the progress
    // bar keeps its start; a new place starts it again.
    const same = t.sale === this.sale && t.ticket === this.knownTicket && t.ticket !== 0;
    this.startAhead = same ? Math.max(this.startAhead, t.ahead) : t.ahead;
    this.knownTicket = t.ticket;
    this.sale = t.sale;
    this.ticket = t;
    // A line closed stays closed whatever a poll sent before the closing says: only units back
    // in stock open it again (saleChanged).
    if (this.saleEnded) this.close('ended');
    else if (t.state === 'sold_out' || this.saleSoldOut) this.close('sold_out');
    if (IN_LINE.has(t.state) || t.state === 'admitted' || t.state === 'sold_out') {
      rememberQueue(this.buyer, this.productID, { sale: t.sale, ticket: t.ticket, startAhead: this.startAhead });
    } else {
      rememberQueue(this.buyer, this.productID, null);
    }
    if (this.closed) return;
    if (IN_LINE.has(t.state)) {
      this.schedule(pollDelay(t));
    } else if (t.state === 'admitted') {
      // Nothing changes until the session ends but the pass, which a poll would only re-sign: ask
      // once it ended (or at once, in its last second, where it has no pass).
      this.schedule(Math.max(MIN_POLL_MS, (Number(t.poll_after_ms) || 0) + 250));
    } else {
      clearTimeout(this.timer); // abandoned, session_over: only a join helps
      this.polling = false;
    }
  }

  /** refused handles a failed join or poll. */
  refused(err, joining) {
    switch (err.code) {
      case 'rate_limited':
      case 'unavailable':
      case 'network':
      case 'internal': {
        this.failures++;
        const backoff = BACKOFF_MS[Math.min(this.failures, BACKOFF_MS.length) - 1];
        const wait = Math.max(err.retryAfterMs || 0, this.ticket ? pollDelay(this.ticket) : 0, backoff);
        if (joining && !this.ticket) {
          this.error = queueMessage(err);
          return;
        }
        this.busy = queueMessage(err, wait);
        this.schedule(wait);
        return;
      }
      case 'sale_ended':
        this.close('ended');
        return;
      case 'no_waiting_room': // the sale was reset to an open one: buy directly
        this.forget();
        return;
      default:
        this.error = queueMessage(err);
        clearTimeout(this.timer);
        this.polling = false;
    }
  }

  forget() {
    clearTimeout(this.timer);
    this.polling = false;
    this.ticket = null;
    this.closed = '';
    this.sale = '';
    this.knownTicket = 0;
    this.startAhead = 0;
    rememberQueue(this.buyer, this.productID, null);
  }
}

/**
 * pollDelay is when to ask again about a ticket in line: the server's poll_after_ms (half the
 * estimated wait, within its bounds), ±10 % at random so that a crowd's polls do not come in waves.
 */
function pollDelay(t) {
  const asked = Number(t.poll_after_ms);
  const base = Number.isFinite(asked) && asked > 0 ? Math.min(Math.max(asked, MIN_POLL_MS), MAX_POLL_MS) : 2000;
  return Math.round(base * (0.9 + Math.random() * 0.2));
}

/** progress is the share of the way to the front a ticket in line has come, 0 to 1. */
export function progress(line) {
  const t = line.ticket;
  if (!t) return 0;
  if (t.state === 'admitted') return 1;
  const start = Math.max(line.startAhead, t.ahead);
  return start > 0 ? (start - t.ahead) / (start + 1) : 0;
}
