// The version svc reports. A release build stamps both constants with `bun build --define`;
// running from source reports the package version and "dev".

declare const SVC_BUILD_VERSION: string | undefined;
declare const SVC_BUILD_COMMIT: string | undefined;

import pkg from "../package.json" with { type: "json" };

export const version: string = typeof SVC_BUILD_VERSION === "string" ? SVC_BUILD_VERSION : pkg.version;
export const commit: string = typeof SVC_BUILD_COMMIT === "string" ? SVC_BUILD_COMMIT : "dev";
export const versionLine = `svc ${version} (${commit}) bun ${Bun.version}`;
