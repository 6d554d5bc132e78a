// Object stores (S3 and compatible servers) for backups and archived WAL, through Bun's
// built-in S3 client: no cloud SDK. A location is an `s3://bucket/prefix` URL; names under it
// are keys below the prefix. Credentials come from the environment only (AWS_* or S3_*),
// never from the configuration file, and never appear in a message or a log line.

import { S3Client } from "bun";
import { SvcError, errorMessage } from "../util/errors.ts";
import { OBJECT_BUCKET_RULE, OBJECT_URL_PATTERN } from "../util/object-url.ts";

export interface ObjectLocation {
  readonly bucket: string;
  /** Key prefix without a trailing slash ("" for the bucket's root). */
  readonly prefix: string;
}

export interface ObjectInfo {
  /** Name below the location's prefix (no leading slash). */
  readonly name: string;
  readonly sizeBytes: number;
  /** Last-modified time the server reports, in ms since the epoch (null when absent). */
  readonly modifiedMs: number | null;
}

/** Pages of a listing are bounded by the server; this bounds how many pages one listing reads. */
const listPagesMax = 10_000;

export function isObjectUrl(text: string): boolean {
  return text.startsWith("s3://");
}

export function parseObjectUrl(url: string): ObjectLocation {
  const m = OBJECT_URL_PATTERN.exec(url);
  if (m === null) {
    throw new SvcError("OBJECT_URL_INVALID", `cannot read ${JSON.stringify(url)} as an object-store location`, {
      hint: `write s3://BUCKET/PREFIX (${OBJECT_BUCKET_RULE})`,
    });
  }
  return { bucket: m[1] ?? "", prefix: (m[2] ?? "").replace(/\/+$/, "") };
}

/** Joins a location and a name back into the URL an operator reads. */
export function objectUrl(location: ObjectLocation, name = ""): string {
  const key = [location.prefix, name].filter((s) => s !== "").join("/");
  return `s3://${location.bucket}${key === "" ? "" : `/${key}`}`;
}

type Env = Readonly<Record<string, string | undefined>>;

function firstSet(env: Env, names: readonly string[]): string | undefined {
  for (const n of names) {
    const v = env[n];
    if (v !== undefined && v !== "") return v;
  }
  return undefined;
}

/** Which variables name the credentials: only their names ever reach a message. */
const credentialVars = {
  accessKeyId: ["AWS_ACCESS_KEY_ID", "S3_ACCESS_KEY_ID"],
  secretAccessKey: ["AWS_SECRET_ACCESS_KEY", "S3_SECRET_ACCESS_KEY"],
  sessionToken: ["AWS_SESSION_TOKEN", "S3_SESSION_TOKEN"],
  region: ["AWS_REGION", "AWS_DEFAULT_REGION", "S3_REGION"],
  endpoint: ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT"],
} as const;

/**
 * An object store at one location. Every call names the URL it worked on when it fails;
 * a server's answer is passed on without the request's signature or credentials.
 */
export class ObjectStore {
  private readonly client: S3Client;

  constructor(readonly location: ObjectLocation, env: Env = process.env) {
    const accessKeyId = firstSet(env, credentialVars.accessKeyId);
    const secretAccessKey = firstSet(env, credentialVars.secretAccessKey);
    if (accessKeyId === undefined || secretAccessKey === undefined) {
      throw new SvcError("OBJECT_STORE_NO_CREDENTIALS", `no credentials for ${objectUrl(location)}`, {
        hint: "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY) in the environment; " +
          "AWS_REGION and AWS_ENDPOINT_URL for a server other than AWS. Credentials are never read from the configuration file",
      });
    }
    const endpoint = firstSet(env, credentialVars.endpoint);
    const sessionToken = firstSet(env, credentialVars.sessionToken);
    this.client = new S3Client({
      accessKeyId,
      secretAccessKey,
      bucket: location.bucket,
      region: firstSet(env, credentialVars.region) ?? "us-east-1",
      ...(endpoint === undefined ? {} : { endpoint }),
      ...(sessionToken === undefined ? {} : { sessionToken }),
      // Path-style requests (https://host/bucket/key) work with AWS and every compatible server.
      virtualHostedStyle: false,
    });
  }

  static at(url: string, env: Env = process.env): ObjectStore {
    return new ObjectStore(parseObjectUrl(url), env);
  }

  url(name = ""): string {
    return objectUrl(this.location, name);
  }

  private key(name: string): string {
    return [this.location.prefix, name].filter((s) => s !== "").join("/");
  }

  /** Every object below the prefix (names relative to it), in key order. */
  async list(options: { under?: string } = {}): Promise<ObjectInfo[]> {
    const base = this.location.prefix === "" ? "" : `${this.location.prefix}/`;
    const prefix = base + (options.under ?? "");
    const out: ObjectInfo[] = [];
    let continuationToken: string | undefined;
    for (let page = 0; page < listPagesMax; page++) {
      const answer = await this.call("list", options.under ?? "", () =>
        this.client.list({ prefix, maxKeys: 1000, ...(continuationToken === undefined ? {} : { continuationToken }) }));
      for (const o of answer.contents ?? []) {
        if (!o.key.startsWith(base)) continue;
        const modified = o.lastModified === undefined ? NaN : Date.parse(String(o.lastModified));
        out.push({ name: o.key.slice(base.length), sizeBytes: o.size ?? 0, modifiedMs: Number.isFinite(modified) ? modified : null });
      }
      if (answer.isTruncated !== true || answer.nextContinuationToken === undefined) break;
      continuationToken = answer.nextContinuationToken;
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async exists(name: string): Promise<boolean> {
    return this.call("stat", name, () => this.client.file(this.key(name)).exists());
  }

  async get(name: string): Promise<Uint8Array> {
    return this.call("get", name, async () => new Uint8Array(await this.client.file(this.key(name)).arrayBuffer()));
  }

  /** Streams an object into a local file (large archives never sit whole in memory). */
  async download(name: string, path: string): Promise<number> {
    return this.call("get", name, () => Bun.write(path, this.client.file(this.key(name))));
  }

  async put(name: string, data: Uint8Array | string): Promise<void> {
    await this.call("put", name, () => this.client.write(this.key(name), data));
  }

  /** Uploads a local file; large files go up in parts, read from disk as they are sent. */
  async upload(path: string, name: string): Promise<void> {
    await this.call("put", name, () => this.client.write(this.key(name), Bun.file(path)));
  }

  async delete(name: string): Promise<void> {
    await this.call("delete", name, () => this.client.delete(this.key(name)));
  }

  private async call<T>(what: string, name: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (e) {
      throw new SvcError("OBJECT_STORE_FAILED", `object store ${what} ${this.url(name)} failed: ${scrub(errorMessage(e))}`, {
        hint: "check the bucket exists, the credentials in the environment may use it, and AWS_ENDPOINT_URL when the server is not AWS",
        cause: e,
      });
    }
  }
}

/** A server's message never carries our secret, but a signature or token in a URL is cut anyway. */
function scrub(message: string): string {
  return message.replace(/(X-Amz-(?:Signature|Credential|Security-Token)=)[^&\s]+/gi, "$1…").slice(0, 500);
}
