// TOML → validated, frozen Config: defaults, units in names, every problem with its line.

export type { Address, AuthSettings, GossipSettings, TlsSettings, Config, ConfigDraft, ConfigProblem, ConfigResult, Member, MemberDraft, AddressInput } from "./types.ts";
export { loadConfigFile, parseConfig } from "./parse.ts";
export { defaultConfig } from "./defaults.ts";
export { NODE_ID_PATTERN } from "./schema.ts";
export { renderConfigToml } from "./render.ts";
export { configWarnings, formatProblem, formatProblems, summarizeConfig } from "./format.ts";
export { addressKey, isWildcardHost, localDialAddress, parseAddress } from "./address.ts";
export { isLoopbackHost, secretFileModeProblem, secretPaths, securityWarnings } from "./secrets.ts";
export { GOSSIP_KEY_BYTES, GOSSIP_KEYS_MAX, newGossipKey, parseGossipKeys, readGossipKeyFile } from "./gossip-key.ts";
export { backupLocationProblem, locationProblem } from "./location.ts";
