// svc-sdk.d.ts: the types of svc-sdk.js, the browser SDK of the Roleplay and Call-Scoring
// Service v1 API (served beside it at GET /sdk/v1/svc-sdk.d.ts). Hand-written; keep in step.

/** The SDK's version (semantic versioning). */
export declare const SDK_VERSION: string;

/** The events an SvcCall emits. */
export declare const EVENTS: readonly ['ready', 'message', 'ended', 'error'];

/** The AI customer the rep talks to. Only `name` is documented; read it loosely. */
export interface Persona {
  name: string;
  [key: string]: unknown;
}

/** `ready`: the call is live. */
export interface ReadyEvent {
  persona: Persona;
  /** The public call id (also on `ended`, the webhook and GET /v1/calls/{callId}). */
  callId: string;
}

/**
 * `message`: one line of the persona. The sandbox's text stand-in for voice: in production
 * the rep hears the persona instead.
 */
export interface MessageEvent {
  text: string;
}

/** `ended`: the call is over (hang-up, the two-hour ceiling, or a dropped connection). */
export interface EndedEvent {
  callId: string;
  /** Whole seconds, as the service measured them (this page's own measure if the connection dropped). */
  durationSec: number;
}

/** The contract's error codes an `error` event carries, and the SDK's own. */
export type ErrorCode =
  | 'INVALID_REQUEST'
  | 'DRILL_NOT_FOUND'
  | 'INVALID_TOKEN'
  | 'TOKEN_EXPIRED'
  | 'TOKEN_ALREADY_USED'
  | 'SERVICE_UNAVAILABLE'
  | 'INTERNAL_ERROR'
  | 'BROWSER_NOT_SUPPORTED'
  | (string & {});

/** `error`: something the service or the network did. Branch on `code`, show `message`. */
export interface ErrorEvent {
  code: ErrorCode;
  message: string;
  /** The HTTP status, when the error is a redeem response. */
  status?: number;
  /** The service's request id, when the error is a redeem response (quote it to support). */
  requestId?: string;
}

export interface SvcCallEvents {
  ready: ReadyEvent;
  message: MessageEvent;
  ended: EndedEvent;
  error: ErrorEvent;
}

export type CallState = 'idle' | 'connecting' | 'live' | 'ending' | 'ended' | 'failed';

export interface SvcCallOptions {
  /** The API's base URL, ending in /v1. */
  baseUrl: string;
}

export interface ConnectOptions {
  /** The drill to practise; v1 supports `ma-full-sale`. */
  drillKey: string;
  /** `Beginner`, `Advanced` (the service's default) or `Elite`. */
  difficulty?: 'Beginner' | 'Advanced' | 'Elite';
  /** Best-effort persona filters. */
  filters?: { state?: string; category?: string };
}

/** A mistake in how the SDK is used; thrown or rejected at once, never an `error` event. */
export declare class SvcUsageError extends Error {
  name: 'SvcUsageError';
}

/** One practice call: handlers first, then connect() once with a fresh session token. */
export declare class SvcCall {
  constructor(options: SvcCallOptions);
  readonly state: CallState;
  readonly callId: string | null;
  readonly persona: Persona | null;
  /** Registers a handler; throws SvcUsageError after connect(). */
  on<E extends keyof SvcCallEvents>(event: E, handler: (payload: SvcCallEvents[E]) => void): this;
  off<E extends keyof SvcCallEvents>(event: E, handler: (payload: SvcCallEvents[E]) => void): this;
  /**
   * Redeems the token and starts the call: the `ready` payload once live, or null when it
   * could not start (the reason went to `error`). Rejects only on misuse.
   */
  connect(token: string, options: ConnectOptions): Promise<ReadyEvent | null>;
  /** Says one line (the sandbox's text stand-in for the rep's voice); only while live. */
  say(text: string): void;
  /** Hangs up: the `ended` payload, or null when the call never started. */
  disconnect(): Promise<EndedEvent | null>;
}
