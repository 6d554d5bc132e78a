// `svc admin <command>` (also the binary invoked as `svc-admin`): one file per command.

import { defineCommand, type CommandDef } from "citty";

// Each admin command lives in its own file and is listed here.
// biome-ignore lint: citty's CommandDef is generic over each command's own args.
const subCommands: Record<string, () => Promise<CommandDef<any>>> = {
  stats: () => import("./stats.ts").then((m) => m.statsCommand),
  query: () => import("./query.ts").then((m) => m.queryCommand),
  token: () => import("./token.ts").then((m) => m.tokenCommand),
  gossip: () => import("./gossip.ts").then((m) => m.gossipCommand),
  "verify-checksums": () => import("./verify-checksums.ts").then((m) => m.verifyChecksumsCommand),
  "pause-writes": () => import("./writes.ts").then((m) => m.pauseWritesCommand),
  "resume-writes": () => import("./writes.ts").then((m) => m.resumeWritesCommand),
  "cluster-info": () => import("./cluster-info.ts").then((m) => m.clusterInfoCommand),
  snapshot: () => import("./snapshot.ts").then((m) => m.snapshotCommand),
  "wal-repair": () => import("./wal-repair.ts").then((m) => m.walRepairCommand),
  "wal-replay": () => import("./wal-replay.ts").then((m) => m.walReplayCommand),
  "wal-archive-put": () => import("./wal-archive-put.ts").then((m) => m.walArchivePutCommand),
  "init-cluster": () => import("./init-cluster.ts").then((m) => m.initClusterCommand),
  "cluster-status": () => import("./cluster-status.ts").then((m) => m.clusterStatusCommand),
  "add-node": () => import("./membership.ts").then((m) => m.addNodeCommand),
  "set-member": () => import("./membership.ts").then((m) => m.setMemberCommand),
  "remove-node": () => import("./membership.ts").then((m) => m.removeNodeCommand),
  promote: () => import("./membership.ts").then((m) => m.promoteCommand),
  "transfer-leader": () => import("./membership.ts").then((m) => m.transferLeaderCommand),
  "cleanup-snapshots": () => import("./cleanup-snapshots.ts").then((m) => m.cleanupSnapshotsCommand),
  "cleanup-wal-archive": () => import("./cleanup-wal-archive.ts").then((m) => m.cleanupWalArchiveCommand),
  "support-bundle": () => import("./support-bundle.ts").then((m) => m.supportBundleCommand),
  backup: () => import("./backup.ts").then((m) => m.backupCommand),
};

export const adminCommand = defineCommand({
  meta: { name: "admin", description: "Administer a node (svc-admin)" },
  subCommands,
});
