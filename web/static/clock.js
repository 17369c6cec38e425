// The server's clock, estimated from the HTTP Date header of the API's answers, so that the
// countdowns open the button when the server opens the sale, whatever the local clock says.
//
// A Date header has one-second resolution: an answer stamped D was produced at a server time in
// [D, D+1 s), at some local instant between sending and receiving. Each answer therefore bounds
// the offset (server − local) to an interval; intersecting the intervals of several answers
// narrows it quickly to well under a second. If the intervals stop overlapping, one clock jumped:
// start again from the latest answer.

let lo = -Infinity;
let hi = Infinity;

/** observeServerDate feeds one answer's Date header and the local send and receive times (ms). */
export function observeServerDate(header, sentAt, receivedAt) {
  if (!header) return;
  const d = Date.parse(header);
  if (Number.isNaN(d)) return;
  const newLo = d - receivedAt;
  const newHi = d + 1000 - sentAt;
  if (newLo > hi || newHi < lo) {
    lo = newLo;
    hi = newHi;
    return;
  }
  lo = Math.max(lo, newLo);
  hi = Math.min(hi, newHi);
}

/** synced reports whether at least one answer has been seen. */
export function synced() {
  return Number.isFinite(lo) && Number.isFinite(hi);
}

/** offsetMs is the estimated server time minus local time, in ms (0 before the first answer). */
export function offsetMs() {
  return synced() ? (lo + hi) / 2 : 0;
}

/** uncertaintyMs is half the width of the offset's interval. */
export function uncertaintyMs() {
  return synced() ? (hi - lo) / 2 : Infinity;
}

/** serverNow is the estimated current server time, in ms since the epoch. */
export function serverNow() {
  return Date.now() + offsetMs();
}

/**
 * probeDelay returns a delay of at least minMs after which a request would reach the server right
 * at a second boundary, by the current estimate: its Date header then says on which side of the
 * boundary the server was, which halves the uncertainty. A few such requests pin the offset down
 * to the round trip time. Once the estimate is that tight (or before the first answer), it
 * returns minMs.
 */
export function probeDelay(minMs) {
  if (!synced() || uncertaintyMs() < 25) return minMs;
  const serverAt = Date.now() + minMs + offsetMs();
  return minMs + ((1000 - (serverAt % 1000)) % 1000);
}

/**
 * serverNowEarliest is the earliest the server's time can be now. A sale is surely open once this
 * passes its start, so the buy button opens on it rather than on the estimate: a click a few
 * hundred milliseconds early would only be refused.
 */
export function serverNowEarliest() {
  return synced() ? Date.now() + lo : Date.now();
}

/**
 * serverNowLatest is the latest the server's time can be now. A deadline the server enforces (the
 * payment window) counts down on it, so that the page never shows time left that the server no
 * longer grants.
 */
export function serverNowLatest() {
  return synced() ? Date.now() + hi : Date.now();
}
