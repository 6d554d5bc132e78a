// The validated configuration of one svc node. Values carry their unit in the name; the TOML
// file uses the operator's units (megabytes, seconds) and parse converts them once, here.
// A Config is deeply frozen: it is read from many places and never changes while a node runs.

/** A "host:port" string split into its parts; `raw` is the text as written, for messages and rendering. */
export interface Address {
  readonly host: string;
  readonly port: number;
  readonly raw: string;
}

export interface Member {
  readonly id: string;
  readonly peer: Address;
  readonly client: Address;
  readonly admin: Address;
}

export interface Config {
  readonly nodeId: string;
  readonly dataDir: string;
  /** max_memory_mb × 2^20. */
  readonly maxMemoryBytes: number;
  /** Log entries between checkpoints, when the store is made durable (snapshot_interval). */
  readonly snapshotIntervalEntries: number;
  /** Where this node binds. */
  readonly listen: {
    readonly client: Address;
    readonly admin: Address;
    readonly peer: Address;
  };
  /** TLS on the client and admin ports; null (or absent, in configurations built in code): plain HTTP. */
  readonly tls?: TlsSettings | null;
  /** Tokens with roles on the client and admin ports; null (or absent): no tokens asked for. */
  readonly auth?: AuthSettings | null;
  /** Gossip encrypted with shared keys; null (or absent): authenticated with a key derived from the cluster id. */
  readonly gossip?: GossipSettings | null;
  readonly cluster: {
    /** True on one node only, the first time a new cluster starts. */
    readonly bootstrap: boolean;
    /** How the nodes reach each other; when non-empty it includes nodeId. */
    readonly members: readonly Member[];
  };
  readonly wal: {
    /** Empty: no archiving. %p is the segment path, %f its file name, %% a percent sign. */
    readonly archiveCommand: string;
    /** archive_timeout × 1000. */
    readonly archiveTimeoutMs: number;
    /** segment_size_mb × 2^20. */
    readonly segmentSizeBytes: number;
  };
  readonly raft: {
    readonly heartbeatIntervalMs: number;
    /** At least 5 × heartbeatIntervalMs. */
    readonly electionTimeoutMs: number;
  };
  /** What one statement may cost (README "Bounded statements"). */
  readonly limits: {
    /** A client's read is stopped after this. */
    readonly queryTimeoutMs: number;
    /** An operator's read (`svc admin query`, stats) is stopped after this. */
    readonly adminQueryTimeoutMs: number;
    /** A write tried before it enters the log is refused after this. */
    readonly writeCheckTimeoutMs: number;
    /**
     * Requests a second one client address may make on the client port, and on the admin port
     * (each its own budget), answered 429 with Retry-After beyond; 0 or absent: no limit.
     */
    readonly clientRequestsPerSecond?: number;
    /** Connections one client address may hold open on each of those ports; 0 or absent: no limit. */
    readonly clientConnectionsMax?: number;
  };
  /**
   * Where `svc admin backup` writes when given no --to (SPEC §4.4, §8): `dir` a directory or
   * s3:// URL for the daily full backups, `offsite` an s3:// URL (or directory) for the weekly
   * copy; "" for none (the timers then do nothing). Absent only in configurations built in code.
   */
  readonly backup?: {
    readonly dir: string;
    readonly offsite: string;
    /** retain_days × 86 400 000. */
    readonly retainMs: number;
    /** offsite_retain_days × 86 400 000. */
    readonly offsiteRetainMs: number;
  };
}

/**
 * One thing wrong with a configuration file. `keyPath` is written as in the file with array
 * indexes, e.g. `cluster.members[1].peer`; empty for problems with the file as a whole.
 * line and column are 1-based and present when the place could be found in the text.
 */
export interface ConfigProblem {
  readonly line?: number;
  readonly column?: number;
  readonly keyPath: string;
  readonly message: string;
  /**
   * The problem is a file of [tls], [auth] or [gossip] as it is now (missing, readable by
   * others, not what it should hold), not the configuration's text: another unit or a
   * rotation may still be writing it, so `serve` exits 1 (restarted) rather than 2.
   */
  readonly secretsFile?: true;
}

export type ConfigResult =
  | {
    readonly ok: true;
    readonly config: Config;
    /**
     * This node's own [cluster] members entry naming addresses it does not listen on: problems
     * for --validate, which the node starts with (set-member may have moved it; see _self-entry.ts).
     */
    readonly selfEntryProblems?: readonly ConfigProblem[];
    /** What may be right behind NAT or a port mapping: --validate prints it and exits 0. */
    readonly selfEntryWarnings?: readonly ConfigProblem[];
    /**
     * Keys the node never reads that hold what their commands will refuse ([backup] dir or
     * offsite that is no location): --validate prints them and exits 0; serve starts.
     */
    readonly warnings?: readonly ConfigProblem[];
  }
  | { readonly ok: false; readonly problems: readonly ConfigProblem[] };

/** An address given to the renderer: either "host:port" or a parsed Address. */
export type AddressInput = string | Address;

export interface MemberDraft {
  readonly id: string;
  readonly peer: AddressInput;
  readonly client: AddressInput;
  readonly admin: AddressInput;
}

/**
 * What renderConfigToml takes: a Config, or only the fields a generator cares about; the rest
 * take the documented defaults. A Config is a ConfigDraft.
 */
export interface ConfigDraft {
  readonly nodeId: string;
  readonly dataDir?: string;
  readonly maxMemoryBytes?: number;
  readonly snapshotIntervalEntries?: number;
  readonly listen?: { readonly client?: AddressInput; readonly admin?: AddressInput; readonly peer?: AddressInput };
  readonly cluster?: { readonly bootstrap?: boolean; readonly members?: readonly MemberDraft[] };
  readonly wal?: { readonly archiveCommand?: string; readonly archiveTimeoutMs?: number; readonly segmentSizeBytes?: number };
  readonly raft?: { readonly heartbeatIntervalMs?: number; readonly electionTimeoutMs?: number };
  readonly limits?: {
    readonly queryTimeoutMs?: number;
    readonly adminQueryTimeoutMs?: number;
    readonly writeCheckTimeoutMs?: number;
    readonly clientRequestsPerSecond?: number;
    readonly clientConnectionsMax?: number;
  };
  readonly tls?: TlsSettings | null;
  readonly auth?: AuthSettings | null;
  readonly gossip?: GossipSettings | null;
}

/** [tls]: absolute paths of PEM files; "" for an optional one not given. */
export interface TlsSettings {
  /** This node's certificate (with its chain), served on the client and admin ports. */
  readonly certFile: string;
  readonly keyFile: string;
  /** When set, clients must present a certificate this CA signed (mutual TLS). */
  readonly clientCaFile: string;
  /**
   * The CA that signed the nodes' certificates, trusted when this node or `svc admin` connects
   * to a node (a follower forwarding to the leader); "" trusts the system's roots.
   */
  readonly caFile: string;
  /**
   * When set, the peer port speaks mutual TLS: every member presents cert_file, which this CA
   * signed and whose subject alternative names hold its node id (DNS name or URI svc://<id>).
   */
  readonly peerCaFile: string;
}

/** [auth]: who may do what on the client and admin ports. */
export interface AuthSettings {
  /** Token hashes and their roles, mode 0600 (README "Security"). */
  readonly tokensFile: string;
  /** A file holding the token `svc admin` sends; "" for none (SVC_TOKEN or --token-file then). */
  readonly tokenFile: string;
  /** /metrics answers without a token (for a scraper) when true. */
  readonly metricsOpen: boolean;
}

/** [gossip]: the shared keys that encrypt gossip packets. */
export interface GossipSettings {
  /** One or two base64 keys of 32 bytes, one per line, mode 0600 (gossip-key.ts); the first encrypts. */
  readonly keyFile: string;
}
