export { assert, assertNever, AssertionError } from "./assert.ts";
export { SvcError, isSvcError, errorMessage } from "./errors.ts";
export { createPrng, type Prng } from "./prng.ts";
export { silentLogger, type Logger, type LogLevel } from "./logger.ts";
export { workerSpecifier } from "./worker.ts";
export { parseJson64, stringifyJson64, jsonInt, exactInt } from "./json64.ts";
export { emptyMembership, encodeMembership, decodeMembership, type Entry, type EntryKind, type HardState, type Membership, type NodeId } from "./log-data.ts";
export { certificateDates, outsideValidity, type CertificateDates } from "./cert-validity.ts";
export { pseudoFileSystemOf, pseudoFileSystemProblem, type PseudoFileSystem } from "./pseudo-fs.ts";
