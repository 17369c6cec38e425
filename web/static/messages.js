// What each error code of the API means to a person, in words. The codes are the API's stable
// error codes (README: "Every error is {"error":{"code","message"}}"), plus "network" for no answer.

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
  method_not_allowed: 'The shop refused this kind of request.',
  unsupported_media_type: 'The shop refused this kind of request.',
  unauthorized: 'This shop verifies its buyers: choose “Change” and paste your buyer token (a valid, unexpired one). Nothing was bought.',
  user_mismatch: 'Your buyer token is for another buyer: choose “Change” and paste the token again. Nothing was bought.',
  internal: 'Something went wrong in the shop. Nothing was bought; try again.',
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

/** adminMessage explains why an admin action failed. */
export function adminMessage(err) {
  if (err && err.code === 'invalid_request') {
    return `Refused: ${err.message}.`;
  }
  return admin[err && err.code] || `The action failed (${(err && err.message) || 'unknown error'}).`;
}
