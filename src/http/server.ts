// Binding the client and admin ports. A port that is taken is reported with the address
// and what to do, before the node has touched any data.
//
// The ports are served by node:http, not Bun.serve: Bun.serve drops the connection when a
// second HTTP/1.1 request arrives in the same read while the first one's handler is still
// running (pipelining), after the first one has already run. node:http answers pipelined
// requests in order. Each request is adapted to a web Request for the Elysia app, with its
// body read here, bounded (413) and with a stall limit (408), and the Response written back.
// With [tls], node:https serves the port (TLS 1.2+, client certificates when configured).
// New certificates take effect by binding a new server on the same port and closing the old
// one, which then stops accepting but finishes its open connections: node:https in Bun has no
// setSecureContext, and a node:tls server handing its sockets to node:http costs about 40%
// of the requests a second that node:https serves.

import { createServer, maxHeaderSize, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { Duplex } from "node:stream";
import type { TlsOptions } from "node:tls";
import type { Address } from "../config/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { listenFailure } from "../util/listen-failure.ts";
import { requestBodyBytesMax, tooLarge } from "./body.ts";
import type { ClientLimiter, RelayClaim } from "./client-limits.ts";
import type { Admission, InFlightBytes } from "./in-flight.ts";
import { errorBody, errorResponse, statusFor } from "./errors.ts";
import { forwardedHeader, relayProofHeader } from "./forward.ts";

interface FetchApp {
  fetch: (request: Request) => Response | Promise<Response>;
}

export interface BoundServer {
  /** The bound port (the configured one, or the one the system picked for port 0). */
  readonly port: number;
  /** Stops accepting and closes every connection, idle or not. */
  stop(): void;
  /**
   * Serves new connections with these certificates (TLS only; open connections keep theirs).
   * Rejects, and keeps serving with the previous ones, when the port cannot be bound again.
   */
  setTls(options: TlsOptions): Promise<void>;
}

/** A request body that sends nothing for this long (up to a second more) is answered 408 and its connection closed. */
export const bodyStallMsMax = 5_000;
/** An idle keep-alive connection is closed after this long. */
const keepAliveIdleMs = 120_000;

/**
 * The request being served on a connection, until it is answered. node:http hands over the
 * next pipelined request before the one ahead of it is answered; it is served only after that
 * one, as sent: RFC 9112 lets a server work on pipelined requests at once only when all are
 * safe, and a POST is not (a read behind a write that was tried before the log ran first, and
 * did not see it).
 */
const answering = new WeakMap<object, Promise<void>>();

/**
 * Binds the port and resolves once it listens; rejects with PORT_IN_USE, PORT_NOT_PERMITTED,
 * ADDRESS_NOT_LOCAL or LISTEN_FAILED
 * (with a hint naming the setting) when it cannot.
 */
export async function listen(app: FetchApp, address: Address, role: "client" | "admin", tls?: TlsOptions, limiter?: ClientLimiter, inFlight?: InFlightBytes): Promise<BoundServer> {
  // Requests get this node's own address as their origin, never the client's Host header:
  // Elysia finds the path by position in the URL, which a crafted Host would move.
  const scheme = tls === undefined ? "http" : "https";
  let origin = originOf(scheme, address.host, address.port);
  const make = (options: TlsOptions | undefined): Server => {
    const limits = limiter?.active === true ? limiter : null;
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      const serve = (): Promise<void> => serveOne(app, origin, req, res, limits, inFlight ?? null);
      const before = answering.get(req.socket);
      const served = before === undefined ? serve() : before.then(serve);
      answering.set(req.socket, served);
      void served.finally(() => {
        if (answering.get(req.socket) === served) answering.delete(req.socket);
      });
    };
    const server = options === undefined ? createServer(handler) : createHttpsServer(options, handler);
    server.keepAliveTimeout = keepAliveIdleMs;
    server.on("clientError", answerClientError);
    server.on("connect", refuseConnect);
    server.on("checkExpectation", refuseExpectation);
    return server;
  };
  let current = make(tls);
  let currentTls = tls;
  // Servers replaced by a reload, finishing their open connections.
  const retired = new Set<Server>();
  const port = await bind(current, address, role, address.port);
  origin = originOf(scheme, address.host, port);
  return {
    port,
    stop: () => {
      for (const server of [current, ...retired]) {
        server.close();
        server.closeAllConnections();
      }
      retired.clear();
    },
    setTls: async (options) => {
      if (currentTls === undefined) return;
      const previous = current;
      const next = make(options);
      // The port is free between these two lines only: a connection attempt then is refused
      // and retried by the client, like one during a restart but far shorter.
      previous.close();
      try {
        await bind(next, address, role, port);
      } catch (e) {
        const back = make(currentTls);
        await bind(back, address, role, port);
        current = back;
        throw e;
      }
      // Idle keep-alive connections close now and reconnect with the new certificate.
      previous.closeIdleConnections();
      retired.add(previous);
      previous.once("close", () => retired.delete(previous));
      current = next;
      currentTls = options;
    },
  };
}

/**
 * A request node:http cannot parse (Content-Length and Transfer-Encoding together, a malformed
 * header or method, headers past the limit) is answered as every error is, with a JSON body and
 * a code, not the parser's bare status line; then the connection is closed, since nothing after
 * it on that connection can be framed. A client that has gone is only let go.
 */
function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  endWithError(socket, clientErrorOf(err));
}

/**
 * CONNECT asks for a tunnel, which svc does not make. node:http hands such a request to a
 * "connect" listener only, and without one it closed the connection with no answer at all.
 */
function refuseConnect(_req: IncomingMessage, socket: Duplex): void {
  const error = new SvcError("METHOD_NOT_ALLOWED", "svc does not take CONNECT: it makes no tunnels", {
    hint: "send GET or POST to a route of this port (see the API in the README)",
  });
  endWithError(socket, error, "allow: GET, HEAD, POST\r\n");
}

/**
 * An Expect header other than 100-continue, which svc cannot meet: node:http answers 417 with
 * no body unless a "checkExpectation" listener answers. The body is left unread: the
 * connection closes after the answer.
 */
function refuseExpectation(req: IncomingMessage, res: ServerResponse): void {
  const expect = String(req.headers.expect ?? "");
  const error = new SvcError("EXPECTATION_FAILED", `svc cannot meet the request's Expect: ${JSON.stringify(expect.slice(0, 80))}`, {
    hint: "send the request without an Expect header, or with Expect: 100-continue",
  });
  const body = JSON.stringify(errorBody(error));
  res.writeHead(statusFor(error.code), { "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" });
  res.end(body);
}

/** Answer a request node:http did not hand to the app with its JSON error, and close the connection. */
function endWithError(socket: Duplex, error: SvcError, headers = ""): void {
  const status = statusFor(error.code);
  const body = JSON.stringify(errorBody(error));
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\ncontent-type: application/json\r\n${headers}content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

/** What a parse error of node:http means for the client. */
export function clientErrorOf(err: Error & { code?: string }): SvcError {
  const code = err.code ?? "parse error";
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return new SvcError("HEADERS_TOO_LARGE", `the request's headers are larger than ${maxHeaderSize} bytes`, { hint: "send fewer or shorter headers" });
    case "ERR_HTTP_REQUEST_TIMEOUT":
    case "HPE_HEADER_TIMEOUT":
      return new SvcError("REQUEST_TIMEOUT", "the request's headers did not arrive in time", { hint: "send the whole request at once" });
    case "HPE_INVALID_TRANSFER_ENCODING":
    case "HPE_UNEXPECTED_CONTENT_LENGTH":
    case "HPE_INVALID_CONTENT_LENGTH":
      return new SvcError("BAD_REQUEST", `malformed HTTP request (${code}): ${err.message}`, {
        hint: "frame a body with one Content-Length (a decimal number) or with Transfer-Encoding: chunked, never both",
      });
    default:
      return new SvcError("BAD_REQUEST", `malformed HTTP request (${code}): ${err.message}`, { hint: "send a well-formed HTTP/1.1 request" });
  }
}

function bind(server: Server, address: Address, role: "client" | "admin", port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error): void => {
      server.close();
      reject(listenError(e, address, role));
    };
    server.once("error", onError);
    try {
      server.listen(port, address.host, () => {
        server.off("error", onError);
        // Once bound, a failure belongs to one connection, and node:http closes that one.
        server.on("error", () => undefined);
        const info = server.address();
        resolve(typeof info === "object" && info !== null ? info.port : port);
      });
    } catch (e) {
      server.off("error", onError);
      reject(listenError(e, address, role));
    }
  });
}

function originOf(scheme: string, host: string, port: number): string {
  return `${scheme}://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

function listenError(e: unknown, address: Address, role: "client" | "admin"): SvcError {
  const f = listenFailure(e, { host: address.host, port: address.port, setting: `listen.${role}` });
  return new SvcError(f.code ?? "LISTEN_FAILED", `cannot listen on ${address.raw} (${role} port): ${f.reason}`, { hint: f.hint, cause: e });
}

async function serveOne(app: FetchApp, origin: string, req: IncomingMessage, res: ServerResponse, limiter: ClientLimiter | null, inFlight: InFlightBytes | null): Promise<void> {
  let response: Response;
  let closeAfter = false;
  let admission: Admission | null = null;
  try {
    // Refused before its body is read: the connection closes after the answer.
    const limited = limiter?.admit(req.socket.remoteAddress ?? "", req.socket, relayClaim(req)) ?? null;
    // Write and read bodies count toward the share of max_memory_mb for bodies (in-flight.ts).
    const kind = inFlight?.counts(originForm(req.url ?? "/")) ?? null;
    const admitted = limited ?? (inFlight === null || kind === null ? null : inFlight.admit(declaredBytes(req), kind));
    if (admitted !== null && !(admitted instanceof SvcError)) admission = admitted;
    // A refused body is read and dropped first (discardBody), so that a client sending all of it
    // before it reads gets the 429 or 503, not a reset; at most discardingMax at once (each holds
    // a socket for up to discardMsMax), and only a few refused for want of memory: what they
    // send is garbage to collect while memory is short.
    const discardable = admitted instanceof SvcError && discarding < (admitted.code === "MEMORY_BACKPRESSURE" ? discardingShortOfMemoryMax : discardingMax);
    if (discardable) {
      discarding++;
      await discardBody(req).finally(() => discarding--);
    }
    const body = admitted instanceof SvcError ? admitted : await readBody(req, admission);
    if (body instanceof SvcError) {
      // The rest of the body is unread (or never comes): the connection cannot carry another request.
      response = errorResponse(body);
      closeAfter = true;
    } else {
      response = await app.fetch(toRequest(req, body, origin, clientGone(res)));
    }
  } catch (e) {
    response = errorResponse(e);
  }
  try {
    await writeResponse(res, response, closeAfter);
  } catch {
    // The client went away while the answer was written: nothing is left to tell it.
    res.destroy();
  }
  admission?.release();
  if (closeAfter) req.socket.destroySoon();
}

/** The relaying a request claims; null when it claims none. */
function relayClaim(req: IncomingMessage): RelayClaim | null {
  const by = req.headers[forwardedHeader];
  const proof = req.headers[relayProofHeader];
  return typeof by === "string" && typeof proof === "string" ? { by, proof } : null;
}

const discardMsMax = 5_000;
/** Refused bodies read and dropped at once, on this port and the other (see serveOne). */
const discardingMax = 64;
/** Of those, while bodies are refused for want of memory. */
const discardingShortOfMemoryMax = 8;
let discarding = 0;

/**
 * Read `req`'s body without keeping any of it, within the body limit and a few seconds. A
 * request refused before its body is read is answered after this: a client that sends its
 * whole body before it reads (most do) met a reset, not the answer, when the connection
 * closed on unread bytes, and took a refusal for an outcome it could not know.
 */
function discardBody(req: IncomingMessage): Promise<void> {
  if (req.headers["content-length"] === undefined && req.headers["transfer-encoding"] === undefined) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = (): void => {
      clearTimeout(timer);
      req.off("data", onData);
      resolve();
    };
    const onData = (chunk: Buffer): void => {
      seen += chunk.byteLength;
      if (seen > requestBodyBytesMax) done();
    };
    const timer = setTimeout(done, discardMsMax);
    req.on("data", onData);
    req.once("end", done);
    req.once("close", done);
    req.once("error", done);
  });
}

/** The body's Content-Length as announced (0 without one: a chunked body is counted as read). */
function declaredBytes(req: IncomingMessage): number {
  const n = Number(req.headers["content-length"] ?? "0");
  return Number.isSafeInteger(n) && n > 0 ? Math.min(n, requestBodyBytesMax) : 0;
}

const noBody = new Uint8Array(0);

/** A body being read: the sweep answers it 408 when it has made no progress for bodyStallMsMax. */
interface BodyRead {
  /** Sweeps since the last chunk arrived. */
  idleSweeps: number;
  stall(): void;
}

const stallSweepMs = 1_000;
const stallSweepsMax = Math.ceil(bodyStallMsMax / stallSweepMs);

/**
 * One timer for all bodies being read, not one per request: a timer per request and per
 * chunk cost a measurable share of a small write's CPU.
 */
class StallSweep {
  readonly #reads = new Set<BodyRead>();
  #timer: ReturnType<typeof setInterval> | null = null;

  add(read: BodyRead): void {
    this.#reads.add(read);
    if (this.#timer === null) {
      this.#timer = setInterval(() => this.#sweep(), stallSweepMs);
      this.#timer.unref();
    }
  }

  remove(read: BodyRead): void {
    this.#reads.delete(read);
  }

  #sweep(): void {
    // Stopped by a sweep that finds nothing, not by the last removal: requests come and go
    // far more often than once a second.
    if (this.#reads.size === 0 && this.#timer !== null) {
      clearInterval(this.#timer);
      this.#timer = null;
    }
    for (const read of this.#reads) {
      read.idleSweeps++;
      if (read.idleSweeps > stallSweepsMax) read.stall();
    }
  }
}

const stallSweep = new StallSweep();

/**
 * The whole body, or the error to answer instead: 413 past requestBodyBytesMax (by the
 * declared length before anything is read, or while reading a chunked body), 408 when the
 * client sends nothing for bodyStallMsMax (up to a second more), 400 when it closes before
 * the declared length, 503 when a chunked body passes the share of bytes in flight (in-flight.ts).
 */
function readBody(req: IncomingMessage, admission: Admission | null): Promise<Uint8Array | SvcError> {
  const declared = req.headers["content-length"];
  const chunked = req.headers["transfer-encoding"] !== undefined;
  if (declared === undefined && !chunked) return Promise.resolve(noBody);
  const length = Number(declared ?? "0");
  if (length > requestBodyBytesMax) return Promise.resolve(tooLarge(length));
  if (declared !== undefined && length === 0) return Promise.resolve(noBody);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let done = false;
    const finish = (result: Uint8Array | SvcError): void => {
      if (done) return;
      done = true;
      stallSweep.remove(read);
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("close", onClose);
      req.off("error", onClose);
      resolve(result);
    };
    const read: BodyRead = {
      idleSweeps: 0,
      stall: () => finish(new SvcError("REQUEST_TIMEOUT", `the request body stopped after ${total} of ${declared ?? "(chunked)"} bytes: nothing arrived for ${bodyStallMsMax / 1000} s`, {
        hint: "send the whole body that Content-Length announces, or use chunked encoding",
      })),
    };
    const onData = (chunk: Buffer): void => {
      total += chunk.byteLength;
      if (total > requestBodyBytesMax) return finish(tooLarge(total));
      if (chunked && declared === undefined) {
        const refused = admission?.grow(chunk.byteLength) ?? null;
        if (refused !== null) return finish(refused);
      }
      chunks.push(chunk);
      read.idleSweeps = 0;
    };
    const onEnd = (): void => finish(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total));
    const onClose = (): void => finish(new SvcError("BAD_REQUEST", `the connection closed after ${total} bytes of the request body`, { hint: "send the whole body before closing the connection" }));
    stallSweep.add(read);
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("close", onClose);
    req.on("error", onClose);
  });
}

/**
 * Fires when the connection closes before the answer is written: the client went away, and
 * work done only for it (a read) can stop.
 */
function clientGone(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

function toRequest(req: IncomingMessage, body: Uint8Array, origin: string, signal: AbortSignal): Request {
  // node:http has joined repeated request headers with ", " (set-cookie, the one kept as a
  // list, is a response header): every value is a string. Passing the object is cheaper than
  // appending header by header.
  const headers = req.headers as Record<string, string>;
  const method = req.method ?? "GET";
  const init: RequestInit = { method, headers, signal };
  if (method !== "GET" && method !== "HEAD") init.body = body;
  return new Request(origin + originForm(req.url ?? "/"), init);
}

/**
 * The path and query of a request target. A server must accept the absolute form as well
 * (RFC 9112 §3.2.2: `GET http://host:7878/health`, as a proxy sends it): its path and query
 * are taken, never its host, for the app and for write admission alike.
 */
function originForm(target: string): string {
  if (target.startsWith("/")) return target;
  if (/^https?:\/\//i.test(target) && URL.canParse(target)) {
    const url = new URL(target);
    return url.pathname + url.search;
  }
  return `/${target}`;
}

async function writeResponse(res: ServerResponse, response: Response, closeAfter: boolean): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of response.headers) {
    if (name === "set-cookie") continue;
    headers[name] = value;
  }
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  if (closeAfter) headers["connection"] = "close";
  const body = response.body === null ? noBody : new Uint8Array(await response.arrayBuffer());
  headers["content-length"] = String(body.byteLength);
  if (response.statusText === "") res.writeHead(response.status, headers);
  else res.writeHead(response.status, response.statusText, headers);
  res.end(body);
}
