// A lean keep-alive HTTP/1.1 client for the load generator: POST only, one request at a
// time per connection, idle connections pooled per origin. On a 2-core machine the load
// generator shares the CPU with the nodes under test; this client costs about a third less
// CPU per request than fetch, which leaves that CPU to the servers.

import type { PostResult } from "./_lib.ts";

/** Largest response the client buffers; the benchmark's answers are well under 1 KiB. */
const responseBytesMax = 1024 * 1024;

interface Waiter {
  resolve: (r: PostResult) => void;
  reject: (e: Error) => void;
}

class Connection {
  private socket: Bun.Socket<undefined> | null = null;
  /** Bytes of a response not yet complete, copied out of the socket's buffer. */
  private partial: Buffer | null = null;
  private waiter: Waiter | null = null;
  private unsent: Buffer | null = null;
  closed = false;

  constructor(private readonly host: string, private readonly port: number, private readonly ca?: string) {}

  async open(): Promise<void> {
    this.socket = await Bun.connect({
      hostname: this.host,
      port: this.port,
      ...(this.ca === undefined ? {} : { tls: { ca: this.ca, serverName: "localhost" } }),
      socket: {
        data: (_s, chunk) => this.onData(chunk),
        drain: (s) => this.flush(s),
        close: () => this.fail(new Error(`connection to ${this.host}:${this.port} closed`)),
        error: (_s, e) => this.fail(e),
      },
    });
    this.socket.setNoDelay(true);
  }

  post(head: string, body: Buffer): Promise<PostResult> {
    const socket = this.socket;
    if (socket === null || this.closed) return Promise.reject(new Error("connection closed"));
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
      this.unsent = Buffer.concat([Buffer.from(head, "latin1"), body]);
      this.flush(socket);
    });
  }

  close(): void {
    this.socket?.end();
    this.fail(new Error("connection closed by the client"));
  }

  /** Bun keeps no send buffer: resend what the kernel did not take once it drains. */
  private flush(socket: Bun.Socket<undefined>): void {
    const unsent = this.unsent;
    if (unsent === null) return;
    const written = socket.write(unsent);
    this.unsent = written < unsent.length ? unsent.subarray(Math.max(0, written)) : null;
  }

  private fail(e: Error): void {
    this.closed = true;
    this.socket = null;
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.reject(e);
  }

  private onData(chunk: Buffer): void {
    const buf = this.partial === null ? chunk : Buffer.concat([this.partial, chunk]);
    this.partial = null;
    const parsed = parseResponse(buf);
    if (parsed === null) {
      if (buf.length > responseBytesMax) return this.fail(new Error(`response larger than ${responseBytesMax} bytes`));
      // The socket may reuse its buffer after this callback: keep a copy.
      this.partial = Buffer.from(buf);
      return;
    }
    const waiter = this.waiter;
    this.waiter = null;
    if (parsed.used < buf.length || waiter === null) return this.fail(new Error("unexpected bytes from the server"));
    waiter.resolve({ ok: parsed.status >= 200 && parsed.status < 300, status: parsed.status, text: parsed.text });
  }
}

/** One complete response at the start of `buf`, or null when more bytes are needed. */
function parseResponse(buf: Buffer): { status: number; text: string; used: number } | null {
  const headEnd = buf.indexOf("\r\n\r\n");
  if (headEnd < 0) return null;
  const head = buf.toString("latin1", 0, headEnd);
  const status = Number(head.slice(9, 12));
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  if (length !== null) {
    const end = headEnd + 4 + Number(length[1]);
    return buf.length < end ? null : { status, text: buf.toString("utf8", headEnd + 4, end), used: end };
  }
  if (!/\r\ntransfer-encoding:\s*chunked/i.test(head)) throw new Error(`response without a length: ${head.slice(0, 200)}`);
  const parts: Buffer[] = [];
  let at = headEnd + 4;
  for (;;) {
    const lineEnd = buf.indexOf("\r\n", at);
    if (lineEnd < 0) return null;
    const size = parseInt(buf.toString("latin1", at, lineEnd), 16);
    if (buf.length < lineEnd + 2 + size + 2) return null;
    if (size === 0) return { status, text: Buffer.concat(parts).toString("utf8"), used: lineEnd + 4 };
    parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

export interface Http1Client {
  post: (url: string, body: string) => Promise<PostResult>;
  close: () => void;
}

/** With `ca`, connections are TLS (the server's certificate checked against it); with `token`, every request carries it. */
export function createHttp1Client(options: { ca?: string; token?: string } = {}): Http1Client {
  const auth = options.token === undefined ? "" : `Authorization: Bearer ${options.token}\r\n`;
  const idle = new Map<string, Connection[]>();
  const all = new Set<Connection>();
  // Parsing a URL costs more than the rest of building a request: parse each once.
  const targets = new Map<string, { host: string; hostname: string; port: number; path: string }>();
  const target = (url: string): { host: string; hostname: string; port: number; path: string } => {
    let t = targets.get(url);
    if (t === undefined) {
      const u = new URL(url);
      t = { host: u.host, hostname: u.hostname, port: Number(u.port), path: u.pathname };
      targets.set(url, t);
    }
    return t;
  };
  const post = async (url: string, body: string): Promise<PostResult> => {
    const u = target(url);
    let conn = idle.get(u.host)?.pop();
    while (conn?.closed === true) conn = idle.get(u.host)?.pop();
    if (conn === undefined) {
      conn = new Connection(u.hostname, u.port, options.ca);
      all.add(conn);
      await conn.open();
    }
    const bytes = Buffer.from(body);
    const head = `POST ${u.path} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\nContent-Length: ${bytes.length}\r\n${auth}\r\n`;
    try {
      const result = await conn.post(head, bytes);
      const pool = idle.get(u.host) ?? [];
      pool.push(conn);
      idle.set(u.host, pool);
      return result;
    } catch (e) {
      all.delete(conn);
      throw e;
    }
  };
  const close = (): void => {
    for (const conn of all) conn.close();
    all.clear();
    idle.clear();
  };
  return { post, close };
}
