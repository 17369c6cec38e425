// purchase.js: the flash-sale stampede of `go run ./loadtest`, for k6 users.
//
// Buyers arrive at a ramping rate (ramping-arrival-rate: arrivals do not wait for slow answers,
// as in a real sale). Each iteration is one buyer: it POSTs a purchase with an Idempotency-Key to
// a replica picked round-robin, then sends the same request again, with the same key, to the next
// replica, the way a client that lost the first answer would. A 202 retried must come back with
// the same order_id (check + seckill_retry_mismatch). Answers are counted by outcome; the
// seckill_accepted counter is the number of distinct purchases accepted, which the database
// audit (`go run ./loadtest -audit-only -k6-summary FILE`) compares with its reservations.
//
// k6 cannot judge overselling: it only sees answers. `make k6` runs the audit afterwards.
//
// Environment (k6 run -e NAME=value, or the process environment):
//   PRODUCT_ID    required: the product on sale (make k6 creates a fresh one)
//   BASE_URLS     replicas, comma-separated (default http://127.0.0.1:8081,...:8082,...:8083)
//   BUYERS        distinct buyers (default 2000). Arrivals beyond BUYERS are those buyers coming
//                 back with a new purchase: the server must answer limit_reached (or sold_out).
//   RUN_ID        prefix of user ids and idempotency keys (default k6-<time>); unique per run
//   START_RATE, PEAK_RATE   arrivals per second at the start and at the peak (default 50, 1000)
//   RAMP_UP, HOLD, RAMP_DOWN  stage durations (default 10s, 5s, 5s)
//   PRE_VUS, MAX_VUS         VUs allocated up front and at most (default 100, 500)
//   REQUEST_TIMEOUT          per request (default 10s)
//   ACCEPTED_P99_MS          threshold on the p99 latency of accepted purchases (default 3000)
//   SUMMARY_FILE             where the JSON summary goes (default loadtest/results/k6-summary.json)
//   SECKILL_BUYER_JWT_HMAC_KEY  when the replicas verify buyer tokens: each buyer signs its own
//                 (HS256, with SECKILL_BUYER_JWT_ISSUER and _AUDIENCE if set), as the Go load test
//                 does with -buyer-jwt-key; empty: user ids are claims

import http from 'k6/http';
import crypto from 'k6/crypto';
import encoding from 'k6/encoding';
import exec from 'k6/execution';
import { check } from 'k6';
import { Counter, Trend } from 'k6/metrics';

const env = (name, fallback) => (__ENV[name] !== undefined && __ENV[name] !== '' ? __ENV[name] : fallback);
const int = (name, fallback) => {
  const v = Number.parseInt(env(name, String(fallback)), 10);
  if (!Number.isFinite(v) || v < 0) {
    throw new Error(`${name} must be a non-negative integer, got ${__ENV[name]}`);
  }
  return v;
};

const PRODUCT_ID = int('PRODUCT_ID', 0);
if (PRODUCT_ID <= 0) {
  throw new Error('PRODUCT_ID is required: k6 run -e PRODUCT_ID=<id> loadtest/k6/purchase.js (make k6 creates one)');
}
const BASE_URLS = env('BASE_URLS', 'http://127.0.0.1:8081,http://127.0.0.1:8082,http://127.0.0.1:8083')
  .split(',')
  .map((u) => u.trim().replace(/\/+$/, ''))
  .filter((u) => u !== '');
if (BASE_URLS.length === 0) {
  throw new Error('BASE_URLS is empty');
}
const BUYERS = Math.max(1, int('BUYERS', 2000));
const SUMMARY_FILE = env('SUMMARY_FILE', 'loadtest/results/k6-summary.json');
const PEAK_RATE = Math.max(1, int('PEAK_RATE', 1000));

export const options = {
  scenarios: {
    stampede: {
      executor: 'ramping-arrival-rate',
      startRate: int('START_RATE', 50),
      timeUnit: '1s',
      preAllocatedVUs: int('PRE_VUS', 100),
      maxVUs: int('MAX_VUS', 500),
      stages: [
        { target: PEAK_RATE, duration: env('RAMP_UP', '10s') },
        { target: PEAK_RATE, duration: env('HOLD', '5s') },
        { target: 0, duration: env('RAMP_DOWN', '5s') },
      ],
      gracefulStop: '30s',
    },
  },
  thresholds: {
    // Every retried 202 came back with its first order_id.
    seckill_retry_mismatch: ['count==0'],
    // Every answer was one of the documented purchase outcomes.
    seckill_other: ['count==0'],
    // 409 sold_out/limit_reached, 429 and 503 are answers the API promises under a stampede,
    // not failures (see setResponseCallback below); anything else counts.
    http_req_failed: ['rate<0.01'],
    // The outcome of a request is known only from its answer, and k6 fixes a request's tags when
    // it is sent, so the accepted latency is its own Trend rather than http_req_duration{…}.
    seckill_accepted_duration: [`p(99)<${int('ACCEPTED_P99_MS', 3000)}`],
  },
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'],
  discardResponseBodies: false,
};

http.setResponseCallback(http.expectedStatuses(202, 409, 429, 503));

const OUTCOMES = ['accepted', 'replayed', 'sold_out', 'limit_reached', 'rate_limited', 'unavailable', 'other'];
const counters = Object.fromEntries(OUTCOMES.map((o) => [o, new Counter(`seckill_${o}`)]));
const retryMismatch = new Counter('seckill_retry_mismatch');
const acceptedDuration = new Trend('seckill_accepted_duration', true);

export function setup() {
  // Every counter gets a sample, so the thresholds are evaluated and the summary JSON always
  // holds metrics.seckill_accepted.values.count, even when nothing was accepted.
  for (const c of Object.values(counters)) c.add(0);
  retryMismatch.add(0);

  const res = http.get(`${BASE_URLS[0]}/api/v1/products/${PRODUCT_ID}`, {
    tags: { name: 'product' },
    responseCallback: http.expectedStatuses(200),
  });
  if (res.status !== 200) {
    throw new Error(`GET product ${PRODUCT_ID} from ${BASE_URLS[0]}: ${res.status} ${res.body}`);
  }
  const p = res.json();
  const runId = (env('RUN_ID', `k6-${Date.now().toString(36)}`).replace(/[^A-Za-z0-9_-]/g, '-')).slice(0, 40);
  console.log(`product ${p.id} "${p.name}": strategy ${p.strategy}, stock ${p.stock}/${p.initial_stock}; ` +
    `${BUYERS} buyers, run ${runId}, replicas ${BASE_URLS.join(' ')}`);
  return { runId, strategy: p.strategy, stock: p.stock };
}

// outcome names an answer the way the Go harness does.
function outcome(res) {
  switch (res.status) {
    case 202:
      return res.headers['Idempotent-Replayed'] === 'true' ? 'replayed' : 'accepted';
    case 409: {
      const code = errorCode(res);
      return code === 'sold_out' || code === 'limit_reached' ? code : 'other';
    }
    case 429:
      return 'rate_limited';
    case 503:
      return 'unavailable';
    default:
      return 'other';
  }
}

function errorCode(res) {
  try {
    return res.json('error.code');
  } catch (_) {
    return '';
  }
}

function orderId(res) {
  try {
    return res.json('order_id');
  } catch (_) {
    return '';
  }
}

const BUYER_JWT_KEY = env('SECKILL_BUYER_JWT_HMAC_KEY', '');

// buyerToken signs user's buyer token (HS256), valid for an hour; '' when buyers are not verified.
function buyerToken(user) {
  if (BUYER_JWT_KEY === '') return '';
  const now = Math.floor(Date.now() / 1000);
  const claims = { sub: user, iat: now, exp: now + 3600 };
  if (env('SECKILL_BUYER_JWT_ISSUER', '') !== '') claims.iss = env('SECKILL_BUYER_JWT_ISSUER', '');
  if (env('SECKILL_BUYER_JWT_AUDIENCE', '') !== '') claims.aud = env('SECKILL_BUYER_JWT_AUDIENCE', '');
  const part = (v) => encoding.b64encode(JSON.stringify(v), 'rawurl');
  const signed = `${part({ alg: 'HS256', typ: 'JWT' })}.${part(claims)}`;
  return `${signed}.${crypto.hmac('sha256', BUYER_JWT_KEY, signed, 'base64rawurl')}`;
}

function purchase(url, body, key, attempt, token) {
  const headers = { 'Content-Type': 'application/json', 'Idempotency-Key': key };
  if (token) headers.Authorization = `Bearer ${token}`;
  return http.post(url, body, {
    headers,
    tags: { name: 'purchase', attempt },
    timeout: env('REQUEST_TIMEOUT', '10s'),
  });
}

// record counts one answer and returns its outcome.
let unexpectedLogged = 0; // per VU: a broken server should not flood the terminal

function record(res) {
  const o = outcome(res);
  counters[o].add(1);
  if (o === 'accepted') acceptedDuration.add(res.timings.duration);
  if (o === 'other' && unexpectedLogged++ < 5) {
    console.warn(`unexpected answer: ${res.status} ${res.error || ''} ${String(res.body).slice(0, 200)}`);
  }
  return o;
}

export default function (data) {
  const iter = exec.scenario.iterationInTest;
  const buyer = iter % BUYERS;
  const user = `${data.runId}-b${buyer}`;
  const body = JSON.stringify({ user_id: user, quantity: 1 });
  const token = buyerToken(user);
  const key = `${data.runId}-i${iter}`;
  const path = `/api/v1/products/${PRODUCT_ID}/purchase`;

  const first = purchase(BASE_URLS[iter % BASE_URLS.length] + path, body, key, 'first', token);
  const firstOutcome = record(first);
  const retry = purchase(BASE_URLS[(iter + 1) % BASE_URLS.length] + path, body, key, 'retry', token);
  record(retry);

  if (firstOutcome === 'accepted') {
    const want = orderId(first);
    const ok = check(retry, {
      'retry with the same Idempotency-Key returns the same order_id': (r) => r.status === 202 && orderId(r) === want,
    });
    if (!ok) {
      retryMismatch.add(1);
      console.error(`buyer ${buyer} key ${key}: first order ${want}, retry ${retry.status} ${String(retry.body).slice(0, 200)}`);
    }
  }
}

export function handleSummary(data) {
  return {
    stdout: textSummary(data),
    [SUMMARY_FILE]: JSON.stringify(data, null, 2),
  };
}

// textSummary is a compact end-of-test summary. k6's own text summary is not importable without
// fetching jslib.k6.io at run time, and this one should work offline; it shows what a sale needs.
function textSummary(data) {
  const m = data.metrics;
  const count = (name) => (m[name] ? m[name].values.count : 0);
  const ms = (v) => (v === undefined ? '-' : v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0));
  const n = (v) => String(Math.round(v)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const pad = (s, w) => (s + ' '.repeat(w)).slice(0, Math.max(w, s.length));
  const trend = (name) => {
    const v = m[name] && m[name].values;
    return v ? `p50=${ms(v.med)} p90=${ms(v['p(90)'])} p95=${ms(v['p(95)'])} p99=${ms(v['p(99)'])} max=${ms(v.max)} ms` : '-';
  };
  const secs = data.state.testRunDurationMs / 1000;
  const lines = [''];
  const setup = data.setup_data || {};
  lines.push(`  seckill-go k6 stampede: product ${PRODUCT_ID} (${setup.strategy || '?'}, stock ${setup.stock ?? '?'}), ` +
    `run ${setup.runId || '?'}, ${secs.toFixed(1)} s`, '');

  lines.push('  THRESHOLDS');
  let allOk = true;
  for (const name of Object.keys(m).sort()) {
    const metric = m[name];
    for (const [expr, t] of Object.entries(metric.thresholds || {})) {
      allOk = allOk && t.ok;
      const v = metric.values;
      const seen = metric.type === 'rate' ? `rate=${(100 * v.rate).toFixed(2)}%`
        : metric.type === 'counter' ? `count=${v.count}`
          : `p99=${ms(v['p(99)'])}ms`;
      lines.push(`    ${t.ok ? '✓' : '✗'} ${pad(name, 28)} ${pad(`'${expr}'`, 16)} ${seen}`);
    }
  }
  lines.push('');

  lines.push('  ANSWERS BY OUTCOME (first attempts and retries)');
  for (const o of OUTCOMES) lines.push(`    ${pad(o, 28)} ${n(count(`seckill_${o}`))}`);
  lines.push(`    ${pad('retry mismatches', 28)} ${n(count('seckill_retry_mismatch'))}`, '');

  const reqs = m.http_reqs ? m.http_reqs.values : { count: 0, rate: 0 };
  const failed = m.http_req_failed ? m.http_req_failed.values : { rate: 0, passes: 0 };
  const checks = m.checks ? m.checks.values : null;
  lines.push('  HTTP');
  lines.push(`    ${pad('requests', 28)} ${n(reqs.count)} (${reqs.rate.toFixed(1)}/s)`);
  lines.push(`    ${pad('accepted', 28)} ${n(count('seckill_accepted'))} (${(count('seckill_accepted') / Math.max(secs, 1e-9)).toFixed(1)}/s over the run)`);
  lines.push(`    ${pad('failed (not 202/409/429/503)', 28)} ${(100 * failed.rate).toFixed(2)}% (${n(failed.passes)})`);
  lines.push(`    ${pad('latency, accepted', 28)} ${trend('seckill_accepted_duration')}`);
  lines.push(`    ${pad('latency, all requests', 28)} ${trend('http_req_duration')}`);
  if (checks) lines.push(`    ${pad('checks', 28)} ${(100 * checks.rate).toFixed(2)}% (${n(checks.passes)} of ${n(checks.passes + checks.fails)})`);
  lines.push('');

  lines.push('  LOAD');
  lines.push(`    ${pad('buyers arrived (iterations)', 28)} ${n(count('iterations'))}`);
  if (count('dropped_iterations') > 0) {
    lines.push(`    ${pad('DROPPED arrivals', 28)} ${n(count('dropped_iterations'))}  (no free VU: raise MAX_VUS or lower PEAK_RATE)`);
  }
  if (m.vus_max) lines.push(`    ${pad('VUs allocated', 28)} ${n(m.vus_max.values.max)}`);
  lines.push('', `  ${allOk ? '✓ every threshold held' : '✗ THRESHOLDS FAILED'}; JSON summary: ${SUMMARY_FILE}`, '');
  return lines.join('\n');
}
