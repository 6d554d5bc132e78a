// `bun run bench`: prints throughput and latency figures. Not a test: nothing is asserted.
//   --duration S     seconds per load row (default 10)
//   --rows N         rows for the single-node memory figure (default 1,000,000)
//   --source         run src/main.ts with bun instead of the compiled dist/svc
//   --bin PATH       run this compiled svc instead of dist/svc (e.g. a build of a given commit)
//   --cpu-prof DIR   with --source: every svc node writes a CPU profile (.cpuprofile and .md) to DIR
//   --single-only    only the single-node part
//   --cluster-only   only the three-node part
//   --scale SIZES    only the scale part: one node filled to each size (e.g. 100MB,1GB,10GB),
//                    then writes, bytes written per byte of data, checkpoints, a new follower,
//                    restarts (bench/scale.ts); off unless given
//   --catchup        only the availability part: a follower 100,000 entries behind catches up
//                    while the leader serves (--catchup-entries N), then a learner added to the
//                    same loaded cluster, two followers of five catching up at once, the
//                    SPEC §4.6 recovery procedures for a follower and the leader, a
//                    leader killed under load, and followers killed one at a time for
//                    --crash-seconds S (default 60) (bench/catchup.ts); off unless given.
//                    --catchup-rows one,two,recover,kill,crash runs only those rows (default: all)
//   --gossip         only the gossip part: convergence after a member dies or comes back, and
//                    CPU per member at rest, for 3 and 5 nodes (bench/gossip.ts;
//                    --gossip-rest-s S, default 20); off unless given
//   --wal-replay N   only the point-in-time restore part: `svc admin wal-replay` over an archive
//                    of N entries (entries/s, peak RSS; bench/wal-replay.ts); off unless given
//   --backup SIZE    only the backup part: one node filled to SIZE (e.g. 1GB), then backup full
//                    (seconds, writes paused, peak RSS), verify, and a restore from the archive
//                    (bench/backup.ts); off unless given
//   --memory         only the memory part: one node per max_memory_mb setting (--memory-mb
//                    SIZES, default 128,512) under three 100 M-row queries and a burst of large
//                    writes; peak RSS of the node and its SQL processes against max_memory_mb + 64 MB
//                    (bench/memory.ts); off unless given
//   --secure         three-node part side by side with a second cluster that has TLS on every port
//                    (mutual TLS between peers) and tokens, with tls/svc ratios (the cost of both)
//   --etcd           three-node part side by side with three etcd members (needs etcd on PATH;
//                    Debian: apt-get install -y etcd-server), with svc/etcd ratios; the single-node
//                    part's one-client rows (Bun fetch, Python) also against one etcd member.
//                    Off unless given.

import { existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { benchCluster } from "./cluster.ts";
import { benchCatchUp } from "./catchup.ts";
import { benchGossip } from "./gossip.ts";
import { benchMemory } from "./memory.ts";
import { benchBackup } from "./backup.ts";
import { benchScale } from "./scale.ts";
import { benchSingle } from "./single.ts";
import { benchWalReplay } from "./wal-replay.ts";

const { values } = parseArgs({
  options: {
    duration: { type: "string", default: "10" },
    rows: { type: "string", default: "1000000" },
    source: { type: "boolean", default: false },
    bin: { type: "string" },
    "cpu-prof": { type: "string" },
    "single-only": { type: "boolean", default: false },
    "cluster-only": { type: "boolean", default: false },
    etcd: { type: "boolean", default: false },
    secure: { type: "boolean", default: false },
    scale: { type: "string" },
    catchup: { type: "boolean", default: false },
    "catchup-entries": { type: "string", default: "100000" },
    "crash-seconds": { type: "string", default: "60" },
    "catchup-rows": { type: "string", default: "one,two,recover,kill,crash" },
    backup: { type: "string" },
    gossip: { type: "boolean", default: false },
    memory: { type: "boolean", default: false },
    "memory-mb": { type: "string", default: "128,512" },
    "gossip-rest-s": { type: "string", default: "20" },
    "wal-replay": { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (values.help) {
  // The help is this file's opening comment.
  const lines = (await Bun.file(import.meta.path).text()).split("\n");
  const header = lines.slice(0, lines.findIndex((l) => !l.startsWith("//")));
  process.stdout.write(header.map((l) => l.slice(3)).join("\n") + "\n");
  process.exit(0);
}
if (values["single-only"] && values["cluster-only"]) {
  process.stderr.write("--single-only and --cluster-only exclude each other\n");
  process.exit(2);
}
const profileDir = values["cpu-prof"];
if (profileDir !== undefined && !values.source) {
  process.stderr.write("--cpu-prof needs --source (the compiled binary takes no bun flags)\n");
  process.exit(2);
}

const repo = resolve(import.meta.dir, "..");
const compiled = join(repo, "dist", "svc");
let bin: string[];
if (values.source) {
  const profile = profileDir === undefined ? [] : ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${resolve(profileDir)}`];
  if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true });
  bin = [process.execPath, ...profile, join(repo, "src", "main.ts")];
} else if (values.bin !== undefined) {
  bin = [resolve(values.bin)];
} else {
  if (!existsSync(compiled)) {
    const build = Bun.spawnSync([process.execPath, "run", "build"], { cwd: repo, stdout: "inherit", stderr: "inherit" });
    if (build.exitCode !== 0) process.exit(1);
  }
  bin = [compiled];
}
const durationMs = Number(values.duration) * 1000;
process.stdout.write(`svc benchmark: ${bin.join(" ")}; ${navigator.hardwareConcurrency} cores\n`);
if (values.catchup) {
  await benchCatchUp({ bin, entries: Number(values["catchup-entries"]), crashSeconds: Number(values["crash-seconds"]), rows: values["catchup-rows"].split(",") });
  process.exit(0);
}
if (values["wal-replay"] !== undefined) {
  await benchWalReplay({ bin, entries: Number(values["wal-replay"]) });
  process.exit(0);
}
if (values.gossip) {
  await benchGossip({ bin, restMs: Number(values["gossip-rest-s"]) * 1000 });
  process.exit(0);
}
if (values.memory) {
  await benchMemory({ bin, sizesMb: values["memory-mb"].split(",").map(Number) });
  process.exit(0);
}
if (values.backup !== undefined) {
  await benchBackup({ bin, size: values.backup });
  process.exit(0);
}
if (values.scale !== undefined) {
  await benchScale({ durationMs, bin, sizes: values.scale.split(",") });
  process.exit(0);
}
if (!values["cluster-only"]) await benchSingle({ durationMs, bin, rows: Number(values.rows), etcd: values.etcd });
if (!values["single-only"]) await benchCluster({ durationMs, bin, etcd: values.etcd, secure: values.secure });
