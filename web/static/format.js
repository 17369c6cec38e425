// Formatting helpers: money, counts, durations. Pure functions, no DOM.

const money = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' });
const count = new Intl.NumberFormat('en-US');
const rate = new Intl.NumberFormat('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });

/** formatPrice turns cents into "$9.99". */
export function formatPrice(cents) {
  return money.format(cents / 100);
}

/** formatCount turns 12345 into "12,345". */
export function formatCount(n) {
  return count.format(n);
}

/** formatFigure is formatCount for a figure that may not be known (yet): "–" then. */
export function formatFigure(n) {
  return typeof n === 'number' ? count.format(n) : '–';
}

/** formatRate turns 12.34 into "12.3". */
export function formatRate(x) {
  return rate.format(x);
}

const pad = (n) => String(n).padStart(2, '0');

/**
 * formatCountdown renders a duration in ms for a countdown: "02:41", "1:02:41", "3 d 4 h".
 * Rounded up to the second, so that a countdown never shows 00:00 while the sale is still closed.
 */
export function formatCountdown(ms) {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const d = Math.floor(total / 86400);
  const h = Math.floor((total % 86400) / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (d > 0) return `${d} d ${h} h`;
  if (h > 0) return `${h}:${pad(m)}:${pad(s)}`;
  return `${pad(m)}:${pad(s)}`;
}

/** formatSpokenDuration renders a duration for screen readers: "2 minutes 41 seconds". */
export function formatSpokenDuration(ms) {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const parts = [];
  const units = [['day', 86400], ['hour', 3600], ['minute', 60], ['second', 1]];
  let rest = total;
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n > 0) parts.push(`${n} ${name}${n === 1 ? '' : 's'}`);
    if (parts.length === 2) break;
  }
  return parts.length ? parts.join(' ') : '0 seconds';
}

const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const dayClock = new Intl.DateTimeFormat(undefined, { weekday: 'short', hour: '2-digit', minute: '2-digit' });

/** formatClock shows a moment in the browser's time zone: "14:03:20", or "Tue 14:03" beyond a day. */
export function formatClock(ms) {
  return Math.abs(ms - Date.now()) < 86400000 ? clock.format(ms) : dayClock.format(ms);
}

/**
 * formatWait renders an estimated wait in whole seconds for a person in a line: "40 s",
 * "3 min", "1 h 5 min". Rounded up: an estimate is no promise, and a wait that ends early is
 * better news than one that runs over.
 */
export function formatWait(secs) {
  const s = Math.max(1, Math.ceil(secs));
  if (s < 90) return `${s} s`;
  if (s < 3600) return `${Math.ceil(s / 60)} min`;
  const h = Math.floor(s / 3600);
  const m = Math.ceil((s % 3600) / 60);
  return m > 0 ? `${h} h ${m} min` : `${h} h`;
}

/** formatAdmitRate says how fast a waiting room lets buyers in: "1 buyer a second", "one every 2 s". */
export function formatAdmitRate(perSecond) {
  if (!(perSecond > 0)) return '';
  if (perSecond >= 1) {
    const n = Math.round(perSecond * 10) / 10;
    return `${count.format(n)} buyer${n === 1 ? '' : 's'} a second`;
  }
  return `one buyer every ${formatWait(1 / perSecond)}`;
}

/** formatSeconds turns 1234 ms into "1.2 s". */
export function formatSeconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** shortID shows the start of a long id: "01a20076…". */
export function shortID(id) {
  return id.length > 12 ? `${id.slice(0, 8)}…` : id;
}
