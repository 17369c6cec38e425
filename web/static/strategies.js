// The stock strategies as GET /api/v1/strategies describes them (the server's catalog, read from
// its strategy registry): what the drawer offers, and what a card says about its sale's strategy.
// Read once per page; until it has been read, or when it cannot be, the page knows no strategy (a
// list of its own would go stale: the registry is the only one), shows a sale's strategy by its
// name alone, and tries again later.

import * as api from './api.js';

const RETRY_MS = 10000;

/** FALLBACK is what the page offers when the catalog cannot be read: nothing. */
const FALLBACK = Object.freeze([]);

// A name or family is used in a class name and a data attribute: the API's are all like this.
const WORD = /^[a-z0-9][a-z0-9-]{0,63}$/;

let catalog = null;
let version = 0;
let reading = null;
let failedAt = -Infinity;

/** strategies lists the strategies in catalog order: the server's, or FALLBACK. */
export function strategies() {
  return catalog || FALLBACK;
}

/** strategiesVersion changes when the list strategies() returns does. */
export function strategiesVersion() {
  return version;
}

/** strategyInfo returns the strategy called name ({name, family, safe, served, summary}), or null. */
export function strategyInfo(name) {
  return strategies().find((s) => s.name === name) || null;
}

/**
 * loadStrategies reads the catalog if it has not been read yet, at most once every RETRY_MS while
 * it fails. It never rejects.
 */
export function loadStrategies() {
  if (catalog) return Promise.resolve();
  if (reading) return reading;
  if (Date.now() - failedAt < RETRY_MS) return Promise.resolve();
  reading = api.strategies()
    .then((list) => {
      const clean = Array.isArray(list) ? list.filter((s) => s && WORD.test(s.name) && WORD.test(s.family)).map((s) => Object.freeze({
        name: s.name,
        family: s.family,
        safe: s.safe === true,
        served: s.served === true,
        summary: typeof s.summary === 'string' ? s.summary : '',
      })) : [];
      if (clean.length === 0) throw new Error('no strategies');
      catalog = Object.freeze(clean);
      version++;
    })
    .catch(() => {
      failedAt = Date.now();
    })
    .finally(() => {
      reading = null;
    });
  return reading;
}

/** familyLabel names a family of strategies for people. */
export function familyLabel(family) {
  return { mysql: 'MySQL', redis: 'Redis', zookeeper: 'ZooKeeper', memcached: 'Memcached', control: 'Control (no lock)' }[family] || family;
}
