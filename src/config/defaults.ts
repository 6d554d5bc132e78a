// The embedded default that `svc serve` runs with no config file: one node on loopback that
// bootstraps its own cluster, with its data in ./svc-data, for trying svc out. That directory
// is taken in the working directory when the default is first built, as an absolute path
// (data_dir must be absolute).

import { resolve } from "node:path";
import { assert } from "../util/index.ts";
import { parseConfig } from "./parse.ts";
import { renderConfigToml } from "./render.ts";
import type { Config, ConfigDraft } from "./types.ts";

const DEFAULT_DRAFT: Omit<ConfigDraft, "dataDir"> = {
  nodeId: "node1",
  listen: { client: "127.0.0.1:7878", admin: "127.0.0.1:9090", peer: "127.0.0.1:7879" },
  cluster: {
    bootstrap: true,
    members: [{ id: "node1", peer: "127.0.0.1:7879", client: "127.0.0.1:7878", admin: "127.0.0.1:9090" }],
  },
};

let cached: Config | undefined;

/** The default, built through the same parser as a file so it obeys every rule a file does. */
export function defaultConfig(): Config {
  if (cached === undefined) {
    const result = parseConfig(renderConfigToml({ ...DEFAULT_DRAFT, dataDir: resolve("svc-data") }), "<embedded default>");
    assert(result.ok, "the embedded default config is valid");
    cached = result.config;
  }
  return cached;
}
