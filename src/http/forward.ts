// A follower hands a request it cannot serve itself (a write, a read at "leader"
// consistency, or a cluster admin action such as pause-writes) to the leader and relays the
// answer, so clients and operators may talk to any node.
// When the forward fails, the client is told whether its write may have happened: NOT_LEADER
// (not applied, retry) only when the request provably never reached the leader; once it may
// have been sent, OUTCOME_UNKNOWN (the write may or may not have been applied).

import { createHmac, timingSafeEqual } from "node:crypto";
import { SvcError, errorMessage } from "../util/errors.ts";
import { relayTarget } from "./relay-context.ts";

/** Names the member that relayed a request (a forward goes once only). */
export const forwardedHeader = "x-svc-forwarded-by";
/**
 * Shows that a member sent it: [limits] let a member's relayed requests pass (client-limits.ts),
 * and a client that sets x-svc-forwarded-by itself must not.
 */
export const relayProofHeader = "x-svc-relay-proof";

/** The node relaying: its id, and the cluster it belongs to ("" before it knows one). */
export interface Relayer {
  readonly nodeId: string;
  readonly clusterId: string;
}

/**
 * A MAC of the relaying node's id under a key derived from the cluster id, which every member
 * holds and a client is not told (with [auth], only an admin token reads it, in stats and
 * cluster-info). It is not a secret from whoever can read a member's data directory, or gossip
 * sent in clear (without [gossip] key_file).
 */
export function relayProof(relayer: Relayer): string {
  // The same few pairs again and again (this node's own, the members' it checks): kept.
  const key = `${relayer.clusterId}\n${relayer.nodeId}`;
  let proof = proofs.get(key);
  if (proof === undefined) {
    proof = createHmac("sha256", `svc relay v1 ${relayer.clusterId}`).update(relayer.nodeId).digest("base64url");
    if (proofs.size >= proofsKeptMax) proofs.clear();
    proofs.set(key, proof);
  }
  return proof;
}

const proofs = new Map<string, string>();
/** A client may claim any node id: the proofs kept stay few all the same. */
const proofsKeptMax = 64;

/** Whether `proof` is the one `by` makes in cluster `clusterId`; never before this node knows its cluster. */
export function isRelayProof(clusterId: string, by: string, proof: string): boolean {
  if (clusterId === "") return false;
  const expected = Buffer.from(relayProof({ nodeId: by, clusterId }));
  const given = Buffer.from(proof);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
const forwardTimeoutMs = 35_000;
const writePath = "/v1/execute";

/**
 * The codes Bun's fetch gives when this node refuses the leader's certificate: the X.509
 * verification errors (expired, not yet valid, self-signed, unknown CA, …) and a name that
 * does not match. fetch checks the certificate when the handshake completes and writes the
 * request only if it passes, so with any of these nothing of the request was sent.
 * (A handshake the leader refuses — this node's own certificate rejected — is not among
 * them: under TLS 1.3 the request is already on its way when the leader's refusal arrives,
 * and fetch reports it as ECONNRESET or EPROTO, as it does a failure after the leader read it.)
 */
const certificateRefused: ReadonlySet<string> = new Set([
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "UNABLE_TO_GET_ISSUER_CERT", "UNABLE_TO_GET_CRL", "UNABLE_TO_DECRYPT_CERT_SIGNATURE", "UNABLE_TO_DECRYPT_CRL_SIGNATURE",
  "UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY", "CERT_SIGNATURE_FAILURE", "CRL_SIGNATURE_FAILURE", "CERT_NOT_YET_VALID", "CERT_HAS_EXPIRED",
  "CRL_NOT_YET_VALID", "CRL_HAS_EXPIRED", "ERROR_IN_CERT_NOT_BEFORE_FIELD", "ERROR_IN_CERT_NOT_AFTER_FIELD",
  "ERROR_IN_CRL_LAST_UPDATE_FIELD", "ERROR_IN_CRL_NEXT_UPDATE_FIELD", "DEPTH_ZERO_SELF_SIGNED_CERT", "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "CERT_CHAIN_TOO_LONG", "CERT_REVOKED", "INVALID_CA",
  "PATH_LENGTH_EXCEEDED", "INVALID_PURPOSE", "CERT_UNTRUSTED", "CERT_REJECTED", "SUBJECT_ISSUER_MISMATCH", "AKID_SKID_MISMATCH",
  "AKID_ISSUER_SERIAL_MISMATCH", "KEYUSAGE_NO_CERTSIGN", "UNABLE_TO_GET_CRL_ISSUER", "UNHANDLED_CRITICAL_EXTENSION",
  "KEYUSAGE_NO_CRL_SIGN", "UNHANDLED_CRITICAL_CRL_EXTENSION", "INVALID_NON_CA", "PROXY_PATH_LENGTH_EXCEEDED",
  "KEYUSAGE_NO_DIGITAL_SIGNATURE", "PROXY_CERTIFICATES_NOT_ALLOWED", "INVALID_EXTENSION", "INVALID_POLICY_EXTENSION",
  "NO_EXPLICIT_POLICY", "DIFFERENT_CRL_SCOPE", "UNSUPPORTED_EXTENSION_FEATURE", "UNNESTED_RESOURCE", "PERMITTED_VIOLATION",
  "EXCLUDED_VIOLATION", "SUBTREE_MINMAX", "APPLICATION_VERIFICATION", "UNSUPPORTED_CONSTRAINT_TYPE",
  "UNSUPPORTED_CONSTRAINT_SYNTAX", "UNSUPPORTED_NAME_SYNTAX", "CRL_PATH_VALIDATION_ERROR", "HOSTNAME_MISMATCH",
  "EMAIL_MISMATCH", "IP_ADDRESS_MISMATCH", "NAME_CONSTRAINTS_WITHOUT_SANS", "UNKNOWN_CERTIFICATE_VERIFICATION_ERROR",
]);

/**
 * Failures of fetch that happen before any byte of the request leaves this node: the
 * connection was refused, the leader's name did not resolve, or this node refused the
 * leader's certificate. Anything else (a reset, a close, a timeout, a body cut short) may
 * come after the leader read the request.
 */
const neverSentCodes: ReadonlySet<string> = new Set([
  "ECONNREFUSED", "ConnectionRefused", "ENOTFOUND", "EAI_AGAIN", "EAI_NONAME", "EAI_FAIL", ...certificateRefused,
]);

/** The leader's client address when `e` says this node is not the leader and one is known. */
export function leaderToForwardTo(e: unknown, request: Request): string | null {
  if (!(e instanceof SvcError) || e.code !== "NOT_LEADER") return null;
  // Forward once only: a request that was already forwarded goes back with the error.
  if (request.headers.get(forwardedHeader) !== null) return null;
  const address = e.details["leaderClient"];
  return typeof address === "string" ? address : null;
}

/**
 * `from`: the request relayed, whose caller's token (and this node's TLS) go along. `abandon`:
 * gives the forward up before its time-out (leadership moved: leader-watch.ts).
 */
export async function forwardToLeader(leaderClient: string, path: string, body: string, relayer: Relayer, from?: Request, abandon?: AbortSignal): Promise<Response> {
  // A read changes nothing: whether or not the leader saw it, it can be sent again.
  return relay({ to: leaderClient, port: "client", path, body, relayer, changes: path === writePath, timeoutMs: forwardTimeoutMs, from, abandon });
}

/** The leader's admin address when `e` says this node is not the leader and one is known. */
export function leaderAdminToForwardTo(e: unknown, request: Request): string | null {
  if (!(e instanceof SvcError) || e.code !== "NOT_LEADER") return null;
  if (request.headers.get(forwardedHeader) !== null) return null;
  const address = e.details["leaderAdmin"];
  return typeof address === "string" ? address : null;
}

/**
 * A cluster admin action (pause-writes, a snapshot, a membership change, …) relayed to the
 * leader's admin port. Every one of them changes something, so the same contract as a write
 * holds: NOT_LEADER only when the request never left this node, OUTCOME_UNKNOWN once it may have.
 */
export function forwardAdminToLeader(leaderAdmin: string, pathAndQuery: string, body: string, relayer: Relayer, timeoutMs: number, from?: Request): Promise<Response> {
  // A caller that goes away abandons the relay too: the leader then sees its request go.
  return relay({ to: leaderAdmin, port: "admin", path: pathAndQuery, body, relayer, changes: true, timeoutMs, from, abandon: from?.signal });
}

interface Relay {
  readonly to: string;
  readonly port: "client" | "admin";
  readonly path: string;
  readonly body: string;
  readonly relayer: Relayer;
  /** Whether the request changes state: a failure after it may have been sent is then OUTCOME_UNKNOWN. */
  readonly changes: boolean;
  readonly timeoutMs: number;
  /** The request relayed: the guard left its caller's token and this node's TLS with it. */
  readonly from: Request | undefined;
  readonly abandon?: AbortSignal | undefined;
}

async function relay(r: Relay): Promise<Response> {
  const addressKey = r.port === "client" ? "leaderClient" : "leaderAdmin";
  // The caller's token goes along (the leader checks it again), over TLS when this node serves TLS.
  const target = relayTarget(r.from);
  try {
    const answer = await fetch(`${target.scheme}://${r.to}${r.path}`, {
      method: "POST",
      body: r.body,
      headers: { ...target.headers, "content-type": "application/json", [forwardedHeader]: r.relayer.nodeId, [relayProofHeader]: relayProof(r.relayer) },
      signal: r.abandon === undefined ? AbortSignal.timeout(r.timeoutMs) : AbortSignal.any([AbortSignal.timeout(r.timeoutMs), r.abandon]),
      ...(target.tls === null ? {} : { tls: target.tls }),
    });
    const headers: Record<string, string> = { "content-type": "application/json", [forwardedHeader]: r.relayer.nodeId };
    const retryAfter = answer.headers.get("retry-after");
    if (retryAfter !== null) headers["retry-after"] = retryAfter;
    return new Response(await answer.arrayBuffer(), { status: answer.status, headers });
  } catch (e) {
    if (!r.changes || neverSent(e)) {
      throw new SvcError("NOT_LEADER", `this node is not the leader and forwarding to the leader at ${r.to} failed: ${errorMessage(e)}`, {
        hint: certificateRefused.has(errorCode(e) ?? "")
          ? `this node refused the TLS certificate of the leader's ${r.port} port: check that it is valid now, signed by the CA in [tls] and names the leader's address; retry once it is fixed, or send the request to the leader`
          : `retry; if it persists, check connectivity to the leader's ${r.port} port`,
        details: { [addressKey]: r.to },
      });
    }
    const what = r.port === "client" ? "write" : "request";
    throw new SvcError("OUTCOME_UNKNOWN", `the ${what} was forwarded to the leader at ${r.to}, and the connection failed before its answer (${errorMessage(e)}): it may or may not have been applied`, {
      hint: r.port === "client"
        ? "retry with the same request_id (applied at most once), or read back whether it was applied before retrying a write that is not idempotent"
        : "check the cluster's state (`svc admin cluster-info`, `svc admin stats`) before retrying",
      details: { [addressKey]: r.to },
    });
  }
}

function errorCode(e: unknown): string | null {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : null;
}

function neverSent(e: unknown): boolean {
  const code = errorCode(e);
  return code !== null && neverSentCodes.has(code);
}
