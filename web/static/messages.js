// What each error code of the API means to a person, in words. The codes are the API's stable
// error codes (docs/api.md, "Errors"), plus "network" for no answer.

import { formatClock } from './format.js';

const purchase = {
  sold_out: 'Sold out: every unit of this sale has been taken.',
  limit_reached: 'You already bought this item: it is one purchase per buyer.',
  sale_not_started: 'This sale has not started yet. The button opens when the countdown ends.',
  sale_ended: 'This sale has ended.',
  rate_limited: 'The shop is busy with this sale, or you tried too often. Nothing was bought; wait a second, then try again.',
  unavailable: 'One of the shop\'s services is down. Nothing was bought; try again in a moment.',
  not_found: 'This product is no longer on sale.',
  network: 'The shop could not be reached. Check your connection and try again: a retry never buys twice.',
  payload_too_large: 'The request was too large for the shop.',
  header_too_large: 'The request was too large for the shop.',
  method_not_allowed: 'The shop refused this kind of request.',
  unsupported_media_type: 'The shop refused this kind of request.',
  unauthorized: 'This shop verifies its buyers: choose “Change” and paste your buyer token (a valid, unexpired one). Nothing was bought.',
  user_mismatch: 'Your buyer token is for another buyer: choose “Change” and paste the token again. Nothing was bought.',
  internal: 'Something went wrong in the shop. Nothing was bought; try again.',
  // A waiting-room sale: the purchase carries the pass its line gave the buyer (Admission-Pass).
  admission_pass_required: 'This sale has a waiting room: join the line, and buy when it is your turn. Nothing was bought.',
  admission_pass_invalid: 'The shop did not accept your pass to this sale (it is another buyer’s, or from before the sale was reset). Nothing was bought; the page asks the line for yours again.',
  admission_pass_expired: 'Your turn ended before the purchase reached the shop. Nothing was bought; join the line again for another turn.',
};

// Joining a waiting-room sale's line and following it: the codes of POST and GET /api/v1/products/{id}/queue.
const queue = {
  queue_not_open: 'The line is not open yet. The button opens when the countdown ends.',
  no_waiting_room: 'This sale has no waiting room any more: buy directly.',
  sale_ended: 'This sale has ended: the line is closed.',
  not_found: 'This product is no longer on sale.',
  rate_limited: 'The shop is busy.',
  unavailable: 'The line’s service is not answering.',
  network: 'The shop cannot be reached.',
  unauthorized: 'This shop verifies its buyers: choose “Change” and paste your buyer token (a valid, unexpired one) to join the line.',
  user_mismatch: 'Your buyer token is for another buyer: choose “Change” and paste the token again.',
  internal: 'Something went wrong in the shop.',
};

// Paying and cancelling an order: the codes of POST /api/v1/orders/{id}/pay and /cancel.
const payment = {
  payment_declined: 'The payment was declined and nothing was charged. Your unit is still held for you: pay again before the time runs out.',
  order_expired: 'Too late: the payment window closed, nothing was charged and the unit went back on sale.',
  order_cancelled: 'This order was cancelled, so it cannot be paid; nothing was charged.',
  order_refused: 'This order was refused after it was accepted, so there is nothing to pay; nothing will be charged.',
  order_already_paid: 'This order is already paid (from another tab or device): nothing more was charged.',
  payment_in_progress: 'A payment for this order is already in progress. Wait a moment: the order updates by itself.',
  order_not_confirmed: 'Your order is still being confirmed. Try again in a moment.',
  not_found: 'The shop does not know this order for this buyer (was the sale reset, or the buyer changed?).',
  unavailable: 'The payment service did not answer in time. Nothing was charged twice: try again, it retries the same payment.',
  network: 'The shop could not be reached. Check your connection and try again: a retry never charges twice.',
  rate_limited: 'The shop is busy. Wait a second, then try again: a retry never charges twice.',
  unauthorized: 'This shop verifies its buyers: choose “Change” and paste your buyer token (a valid, unexpired one).',
  user_mismatch: 'Your buyer token is for another buyer: choose “Change” and paste the token again.',
  internal: 'Something went wrong in the shop. Try again: a retry never charges twice.',
};

const cancel = {
  order_already_paid: 'This order is already paid: it can no longer be cancelled.',
  order_expired: 'The payment window already closed: the order expired and its unit went back on sale.',
  order_refused: 'This order was refused after it was accepted: there is nothing to cancel, and nothing will be charged.',
  payment_in_progress: 'A payment for this order is in progress: it cannot be cancelled now.',
  order_not_confirmed: 'Your order is still being confirmed. Try again in a moment.',
  not_found: 'The shop does not know this order for this buyer (was the sale reset, or the buyer changed?).',
  unavailable: 'One of the shop\'s services is down. The order was not cancelled; try again in a moment.',
  network: 'The shop could not be reached. The order was not cancelled; try again.',
  rate_limited: 'The shop is busy. Wait a second, then try again.',
  unauthorized: 'This shop verifies its buyers: choose “Change” and paste your buyer token (a valid, unexpired one).',
  user_mismatch: 'Your buyer token is for another buyer: choose “Change” and paste the token again.',
  internal: 'Something went wrong in the shop. The order was not cancelled; try again.',
};

const admin = {
  unauthorized: 'The admin token was refused. Enter the token the server was started with.',
  stampede_running: 'A stampede is already running on this server. Wait for it to finish.',
  rate_limited: 'Too many wrong admin tokens from this address: wait a moment, then enter the right one.',
  not_found: 'No such product or stampede, or no admin API at this address: the public entry point refuses it (with make up, open the operations address, http://127.0.0.1:8079).',
  network: 'The shop could not be reached. Check your connection and try again.',
  unavailable: 'A service of the shop is down or too slow. Try again in a moment.',
  internal: 'Something went wrong in the shop. Try again.',
};

/** retryable lists the purchase failures worth retrying with the same Idempotency-Key. */
export const retryableCodes = new Set(['network', 'rate_limited', 'unavailable', 'internal']);

/** purchaseMessage explains why a purchase failed. */
export function purchaseMessage(err) {
  if (err && err.code === 'invalid_request') {
    return `The shop refused the request: ${err.message}.`;
  }
  return purchase[err && err.code] || `The purchase failed (${(err && err.message) || 'unknown error'}). Nothing was bought.`;
}

/**
 * queueMessage explains why joining or following a line failed. With retryInMs, the page asks
 * again by itself then, and the buyer keeps their place meanwhile (a short silence is not
 * leaving: the line skips only a buyer unheard for longer when their turn comes).
 */
export function queueMessage(err, retryInMs) {
  const code = err && err.code;
  if (retryInMs !== undefined) {
    const why = queue[code] || 'The line did not answer.';
    return `${why} Checking your place again in ${Math.max(1, Math.round(retryInMs / 1000))} s: you keep it meanwhile.`;
  }
  if (code === 'queue_not_open') {
    // The server's message says when: "the sale's queue is not open yet: it opens at <RFC 3339>".
    const at = Date.parse((/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/.exec(err.message || '') || [''])[0]);
    return Number.isNaN(at) ? queue.queue_not_open : `The line is not open yet: it opens at ${formatClock(at)}. The button opens then.`;
  }
  if (code === 'invalid_request') return `The shop refused to put you in the line: ${err.message}.`;
  const retry = code === 'network' || code === 'rate_limited' || code === 'unavailable' || code === 'internal';
  return queue[code] ? `${queue[code]}${retry ? ' You are not in the line yet: try again.' : ''}`
    : `Joining the line failed (${(err && err.message) || 'unknown error'}). Try again.`;
}

/**
 * payRetryableCodes lists the payment failures whose retry reuses the attempt's Idempotency-Key:
 * the attempt may have reached the provider (or be there still), and its key's answer is the one
 * to get. After any other answer (a decline above all) the next attempt is a new payment with a
 * new key.
 */
export const payRetryableCodes = new Set(['network', 'unavailable', 'internal', 'rate_limited', 'payment_in_progress']);

/** payMessage explains why a payment failed. */
export function payMessage(err) {
  if (err && err.code === 'invalid_request') {
    return `The shop refused the payment: ${err.message}.`;
  }
  return payment[err && err.code] || `The payment failed (${(err && err.message) || 'unknown error'}). Try again: a retry never charges twice.`;
}

/** cancelMessage explains why cancelling an order failed. */
export function cancelMessage(err) {
  if (err && err.code === 'invalid_request') {
    return `The shop refused to cancel: ${err.message}.`;
  }
  return cancel[err && err.code] || `The order could not be cancelled (${(err && err.message) || 'unknown error'}).`;
}

/** adminMessage explains why an admin action failed. */
export function adminMessage(err) {
  if (err && err.code === 'invalid_request') {
    return `Refused: ${err.message}.`;
  }
  return admin[err && err.code] || `The action failed (${(err && err.message) || 'unknown error'}).`;
}
