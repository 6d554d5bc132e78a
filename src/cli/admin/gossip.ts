// `svc admin gossip keygen`: prints a new random gossip key (32 bytes, base64), a line for
// [gossip] key_file. Nothing is written: redirect it into the file (mode 0600) on every node,
// or add it as the second line to rotate (README "Security").

import { defineCommand } from "citty";
import { newGossipKey } from "../../config/index.ts";

const keygenCommand = defineCommand({
  meta: { name: "keygen", description: "Print a new gossip encryption key (base64, 32 bytes) for [gossip] key_file" },
  run() {
    process.stdout.write(`${newGossipKey()}\n`);
  },
});

export const gossipCommand = defineCommand({
  meta: { name: "gossip", description: "Gossip encryption keys" },
  subCommands: { keygen: keygenCommand },
});
