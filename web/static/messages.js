// What each error code of the API means to a person, in words. The codes are the API's stable
// error codes (docs/api.md, "Errors"), plus "network" for no answer.

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
