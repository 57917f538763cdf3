// svc-sdk.js: the browser SDK of the Roleplay and Call-Scoring Service v1 API.
//
// One dependency-free ES module, served by the service at GET /sdk/v1/svc-sdk.js (types in
// svc-sdk.d.ts beside it). It redeems a session token (POST /v1/roleplay/session, the one
// endpoint that accepts cross-origin requests) and runs the live practice call.
//
//   import { SvcCall } from 'https://<service host>/sdk/v1/svc-sdk.js';
//   const call = new SvcCall({ baseUrl: 'https://<service host>/v1' });
//   call.on('ready', ({ persona }) => showPersona(persona.name));
//   call.on('message', ({ text }) => showLine(text));
//   call.on('ended', ({ callId, durationSec }) => showEnded(callId, durationSec));
//   call.on('error', ({ code, message }) => showError(code, message));
//   await call.connect(token, { drillKey: 'ma-full-sale' });
//   call.say('Hi, this is Sam with Acme Health.');
//   await call.disconnect();
//
// The production transport is voice: the rep talks into the microphone and hears the persona.
// This build speaks the sandbox's text transport instead: `say(text)` stands for what the rep
// says and the `message` event carries the persona's lines. Everything else (redeem, the
// ready / ended / error events, their payloads and codes) is the contract's.

/** The SDK's version (semantic versioning; a breaking change is a major release). */
export const SDK_VERSION = '1.0.0';

/** Events an SvcCall emits. */
export const EVENTS = Object.freeze(['ready', 'message', 'ended', 'error']);

const READY_TIMEOUT_MS = 15000;
const END_TIMEOUT_MS = 10000;

/**
 * A mistake in how the SDK is used (a handler registered after connect(), say() before the
 * call is live, ...). Thrown (or rejected) at once, never sent to the `error` event, which
 * carries what the service or the network did.
 */
export class SvcUsageError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SvcUsageError';
  }
}

/** Why this page cannot run a call, or null when it can. */
function unsupportedReason() {
  if (typeof fetch !== 'function' || typeof WebSocket !== 'function') {
    return 'this browser has no fetch or WebSocket: use a current desktop Chromium-based browser or Firefox';
  }
  if (globalThis.isSecureContext === false) {
    return 'the page is not a secure context: serve it over HTTPS, or from localhost while developing';
  }
  return null;
}

/** The error a response without the contract's envelope stands for. */
function codeForStatus(status) {
  if (status === 502 || status === 503 || status === 504 || status === 429) return 'SERVICE_UNAVAILABLE';
  if (status >= 500) return 'INTERNAL_ERROR';
  if (status === 401) return 'INVALID_TOKEN';
  return 'INVALID_REQUEST';
}

async function readJson(response) {
  try {
    return await response.json();
  } catch {
    return null;
  }
}

/**
 * One practice call. Register handlers with on(), then connect() once with a fresh session
 * token; use a new SvcCall (and a new token) for the next call.
 */
export class SvcCall {
  #baseUrl;
  #handlers = new Map(EVENTS.map((event) => [event, []]));
  #state = 'idle';
  #socket = null;
  #callId = null;
  #persona = null;
  #readyAt = 0;
  #hangUpWhenReady = false;
  #failed = false;
  #ended = null;
  #timer = null;
  #connected = null; // resolves connect(): the ready payload, or null on failure
  #endWaiters = [];

  /**
   * @param {{ baseUrl: string }} options baseUrl is the API's base URL, ending in /v1.
   */
  constructor(options) {
    const baseUrl = options && options.baseUrl;
    if (typeof baseUrl !== 'string' || baseUrl.trim() === '') {
      throw new SvcUsageError('new SvcCall({ baseUrl }): baseUrl is required, e.g. "https://api.example.com/v1"');
    }
    this.#baseUrl = baseUrl.trim().replace(/\/+$/, '');
  }

  /** 'idle', 'connecting', 'live', 'ending', 'ended' or 'failed'. */
  get state() {
    return this.#state;
  }

  /** The public call id, once the token is redeemed. */
  get callId() {
    return this.#callId;
  }

  /** The persona ({ name }), once the token is redeemed. */
  get persona() {
    return this.#persona;
  }

  /**
   * Registers a handler. Only before connect(): a handler registered later could miss its
   * event, so that is a usage error (thrown).
   */
  on(event, handler) {
    if (!EVENTS.includes(event)) {
      throw new SvcUsageError(`call.on(${JSON.stringify(event)}): unknown event; the events are ${EVENTS.join(', ')}`);
    }
    if (typeof handler !== 'function') {
      throw new SvcUsageError(`call.on(${JSON.stringify(event)}, handler): the handler must be a function`);
    }
    if (this.#state !== 'idle') {
      throw new SvcUsageError(
        `call.on(${JSON.stringify(event)}) after connect(): register every handler before connect(), ` +
          'so that no event is missed (service API contract, section 6)'
      );
    }
    this.#handlers.get(event).push(handler);
    return this;
  }

  /** Removes a handler registered with on() (allowed at any time). */
  off(event, handler) {
    const handlers = this.#handlers.get(event);
    if (handlers) {
      const at = handlers.indexOf(handler);
      if (at >= 0) handlers.splice(at, 1);
    }
    return this;
  }

  /**
   * Redeems `token` and starts the call. Resolves with the `ready` payload once the call is
   * live, or with null when it could not start: the reason went to the `error` event (a redeem
   * error carries the contract's code: TOKEN_ALREADY_USED, TOKEN_EXPIRED, INVALID_TOKEN,
   * DRILL_NOT_FOUND, ...). Rejects only on misuse (a second connect(), no token).
   *
   * @param {string} token a session token from your backend (POST /v1/session)
   * @param {{ drillKey: string, difficulty?: string, filters?: { state?: string, category?: string } }} options
   */
  async connect(token, options = {}) {
    if (this.#state !== 'idle') {
      throw new SvcUsageError('connect() was already called: use a new SvcCall, with a new token, for another call');
    }
    if (typeof token !== 'string' || token.trim() === '') {
      throw new SvcUsageError('connect(token): the session token your backend minted (POST /v1/session) is required');
    }
    this.#state = 'connecting';
    const unsupported = unsupportedReason();
    if (unsupported) return this.#fail('BROWSER_NOT_SUPPORTED', unsupported);

    const body = {};
    for (const key of ['drillKey', 'difficulty', 'filters']) {
      if (options && options[key] !== undefined && options[key] !== null) body[key] = options[key];
    }
    let response;
    try {
      response = await fetch(`${this.#baseUrl}/roleplay/session`, {
        method: 'POST',
        mode: 'cors',
        credentials: 'omit',
        cache: 'no-store',
        redirect: 'error',
        headers: { Authorization: `Bearer ${token.trim()}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
    } catch (error) {
      return this.#fail('SERVICE_UNAVAILABLE', `the service could not be reached at ${this.#baseUrl}: ${error.message}`);
    }
    const payload = await readJson(response);
    if (!response.ok) {
      const envelope = payload && typeof payload === 'object' ? payload.error : null;
      const code = envelope && typeof envelope.code === 'string' ? envelope.code : codeForStatus(response.status);
      const message =
        envelope && typeof envelope.message === 'string' ? envelope.message : `the service answered HTTP ${response.status}`;
      const extra = { status: response.status };
      const requestId = (envelope && envelope.requestId) || response.headers.get('X-Service-Request-Id');
      if (requestId) extra.requestId = requestId;
      return this.#fail(code, message, extra);
    }
    if (!payload || typeof payload.connectionUrl !== 'string' || typeof payload.connectionTicket !== 'string') {
      return this.#fail('INTERNAL_ERROR', 'the service answered the redeem without connection details');
    }
    this.#callId = typeof payload.callId === 'string' ? payload.callId : null;
    this.#persona = payload.persona || null;
    return this.#open(payload.connectionUrl, payload.connectionTicket);
  }

  /**
   * Says one line to the persona (the sandbox's text stand-in for the rep's voice). The
   * persona's reply arrives as a `message` event. Only while the call is live.
   */
  say(text) {
    if (this.#state !== 'live') {
      throw new SvcUsageError(`say() needs a live call (this one is ${this.#state}): wait for the ready event`);
    }
    if (typeof text !== 'string') {
      throw new SvcUsageError('say(text): text must be a string');
    }
    this.#send({ type: 'say', text });
  }

  /**
   * Hangs up. Resolves with the `ended` payload once the service confirms the end (or null
   * when the call never started). Called while connecting, it hangs up as soon as the call is
   * live, so a redeemed token never leaves a call running.
   */
  disconnect() {
    switch (this.#state) {
      case 'idle':
      case 'failed':
        return Promise.resolve(null);
      case 'ended':
        return Promise.resolve(this.#ended);
      case 'connecting':
        this.#hangUpWhenReady = true;
        break;
      case 'live':
        this.#hangUp();
        break;
      default:
        break;
    }
    return new Promise((resolve) => this.#endWaiters.push(resolve));
  }

  #hangUp() {
    this.#state = 'ending';
    this.#send({ type: 'end' });
    this.#arm(END_TIMEOUT_MS, () => {
      this.#closeSocket();
      this.#finish(this.#localEnd());
    });
  }

  #open(connectionUrl, ticket) {
    return new Promise((resolve) => {
      this.#connected = resolve;
      let socket;
      try {
        socket = new WebSocket(connectionUrl);
      } catch (error) {
        this.#fail('SERVICE_UNAVAILABLE', `cannot open the live connection: ${error.message}`);
        return;
      }
      this.#socket = socket;
      this.#arm(READY_TIMEOUT_MS, () => {
        this.#closeSocket();
        this.#fail('SERVICE_UNAVAILABLE', `the call did not start within ${READY_TIMEOUT_MS / 1000} s`);
      });
      socket.addEventListener('open', () => this.#send({ type: 'auth', ticket }));
      socket.addEventListener('message', (event) => this.#onFrame(event.data));
      socket.addEventListener('close', (event) => this.#onClose(event));
    });
  }

  #onFrame(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      this.#emit('error', { code: 'INTERNAL_ERROR', message: 'the service sent a frame that is not JSON' });
      return;
    }
    switch (frame && frame.type) {
      case 'ready': {
        this.#disarm();
        this.#state = 'live';
        this.#readyAt = Date.now();
        if (typeof frame.callId === 'string') this.#callId = frame.callId;
        if (frame.persona) this.#persona = frame.persona;
        const ready = { persona: this.#persona, callId: this.#callId };
        this.#emit('ready', ready);
        this.#settleConnect(ready);
        if (this.#hangUpWhenReady && this.#state === 'live') this.#hangUp();
        break;
      }
      case 'persona':
        this.#emit('message', { text: String(frame.text ?? '') });
        break;
      case 'ended':
        this.#finish({
          callId: typeof frame.callId === 'string' ? frame.callId : this.#callId,
          durationSec: Number.isInteger(frame.durationSec) ? frame.durationSec : this.#localEnd().durationSec,
        });
        this.#closeSocket();
        break;
      case 'error': {
        const code = typeof frame.code === 'string' && frame.code ? frame.code : 'INTERNAL_ERROR';
        if (this.#state === 'connecting') this.#failed = true;
        this.#emit('error', { code, message: String(frame.message ?? '') });
        break;
      }
      default:
        break; // a frame type from a later version: ignored
    }
  }

  #onClose(event) {
    this.#socket = null;
    switch (this.#state) {
      case 'connecting':
        if (this.#failed) {
          this.#disarm();
          this.#state = 'failed';
          this.#settleConnect(null);
          this.#settleEnd(null);
        } else {
          this.#fail('SERVICE_UNAVAILABLE', `the live connection closed before the call started (code ${event.code})`);
        }
        break;
      case 'live':
        this.#emit('error', {
          code: 'SERVICE_UNAVAILABLE',
          message: `the live connection dropped (code ${event.code}); the service ended the call`,
        });
        this.#finish(this.#localEnd());
        break;
      case 'ending':
        this.#finish(this.#localEnd());
        break;
      default:
        break;
    }
  }

  /** The end as this page measured it, when the service's `ended` frame cannot arrive. */
  #localEnd() {
    const durationSec = this.#readyAt ? Math.max(0, Math.round((Date.now() - this.#readyAt) / 1000)) : 0;
    return { callId: this.#callId, durationSec };
  }

  #finish(ended) {
    if (this.#state === 'ended') return;
    this.#disarm();
    this.#state = 'ended';
    this.#ended = ended;
    this.#emit('ended', ended);
    this.#settleEnd(ended);
  }

  #fail(code, message, extra = {}) {
    this.#disarm();
    this.#state = 'failed';
    this.#emit('error', { code, message, ...extra });
    this.#settleConnect(null);
    this.#settleEnd(null);
    return null;
  }

  #settleConnect(value) {
    const resolve = this.#connected;
    this.#connected = null;
    if (resolve) resolve(value);
  }

  #settleEnd(value) {
    const waiters = this.#endWaiters;
    this.#endWaiters = [];
    for (const resolve of waiters) resolve(value);
  }

  #send(frame) {
    if (this.#socket && this.#socket.readyState === WebSocket.OPEN) {
      this.#socket.send(JSON.stringify(frame));
    }
  }

  #closeSocket() {
    const socket = this.#socket;
    this.#socket = null;
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000);
  }

  #arm(ms, then) {
    this.#disarm();
    this.#timer = setTimeout(then, ms);
  }

  #disarm() {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #emit(event, payload) {
    const handlers = this.#handlers.get(event).slice();
    if (event === 'error' && handlers.length === 0) {
      console.error(`[svc-sdk] ${payload.code}: ${payload.message} (register call.on('error', ...) to handle it)`);
    }
    for (const handler of handlers) {
      try {
        handler(payload);
      } catch (error) {
        // A throwing handler must not break the call: report it as the page's own error.
        if (typeof globalThis.reportError === 'function') globalThis.reportError(error);
        else console.error(error);
      }
    }
  }
}
