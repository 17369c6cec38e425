// The server's event stream (GET /api/v1/events, Server-Sent Events), and the way back to polling.
//
// A flash sale is watched by far more people than can buy: one stream per viewer, fed from the
// replica's memory, costs the server much less than a list and a stats request per card every
// second. So the page follows the stream while it works, and polls as before only when it does
// not: when the server refuses the stream (over its limits it answers 429 or 503, on which
// EventSource gives up), or when the stream sends nothing for too long while opening or coming
// back. Then it tries the stream again after 15-30 s, at random, so that the viewers a server
// turned away do not all come back in one wave.
//
// A stream that stays open but goes silent cannot be told from a quiet sale: its keep-alive pings
// are comments, which EventSource does not show. A proxy that holds the connection without
// forwarding anything is caught while opening (no snapshot); one that stalls later is not.

const STREAM_URL = '/api/v1/events';
// The events that carry one product: {"product": P, "stats": V}.
const PRODUCT_EVENTS = ['reset', 'opened', 'stock', 'sold_out', 'on_sale', 'ended', 'stats'];
// The snapshot is the stream's first event: a stream without one by then is not getting through.
const SNAPSHOT_MS = 5000;
// The browser reconnects by itself within a few seconds (the server's retry: is 1-3 s).
const RECONNECT_MS = 10000;
const RETRY_MIN_MS = 15000;
const RETRY_MAX_MS = 30000;

/**
 * LiveFeed follows the event stream. Its mode is "connecting" until the first snapshot, "stream"
 * while the stream feeds the page, and "polling" from the moment it is refused or broken until a
 * stream brings a snapshot again. host receives snapshot(items), event(type, item) and mode(mode).
 */
export class LiveFeed {
  constructor(host) {
    this.host = host;
    this.mode = 'connecting';
    /** @type {EventSource|null} */
    this.source = null;
    this.timer = 0;
  }

  /** start opens the stream, unless it is open: at once, even during a back-off. */
  start() {
    if (this.source) return;
    clearTimeout(this.timer);
    const source = new EventSource(STREAM_URL);
    this.source = source;
    let synced = false;
    this.watch(SNAPSHOT_MS);
    source.addEventListener('snapshot', (e) => {
      const data = parse(e.data);
      if (!data || !Array.isArray(data.items)) return;
      synced = true;
      clearTimeout(this.timer);
      this.setMode('stream');
      this.host.snapshot(data.items);
    });
    for (const type of PRODUCT_EVENTS) {
      source.addEventListener(type, (e) => {
        const item = parse(e.data);
        if (synced && item && item.product) this.host.event(type, item);
      });
    }
    // A reconnection resumes where the stream was (Last-Event-ID): no snapshot needed.
    source.addEventListener('open', () => {
      if (synced) clearTimeout(this.timer);
    });
    source.addEventListener('error', () => {
      if (source.readyState === EventSource.CLOSED) this.broken();
      else this.watch(RECONNECT_MS);
    });
  }

  /** stop closes the stream (the page is hidden); the mode stays as it was. */
  stop() {
    clearTimeout(this.timer);
    if (this.source) this.source.close();
    this.source = null;
  }

  watch(ms) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.broken(), ms);
  }

  broken() {
    this.stop();
    this.setMode('polling');
    this.timer = setTimeout(() => this.start(), RETRY_MIN_MS + Math.random() * (RETRY_MAX_MS - RETRY_MIN_MS));
  }

  setMode(mode) {
    if (this.mode === mode) return;
    this.mode = mode;
    this.host.mode(mode);
  }
}

function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
