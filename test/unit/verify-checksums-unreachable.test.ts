// verify-checksums asked of a node that does not answer: a stopped node is checked offline (as
// PostgreSQL's pg_checksums checks a stopped server), so the refusal names --offline and
// --data-dir beside "is it running".

import { expect, test } from "bun:test";
import { runCommand } from "citty";
import { verifyChecksumsCommand } from "../../src/cli/admin/verify-checksums.ts";
import { CliExit } from "../../src/cli/_exit.ts";

test("a node that does not answer: the message names the offline check of a stopped node's data directory", async () => {
  const closed = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const url = `http://127.0.0.1:${closed.port}`;
  closed.stop(true);
  const e = await runCommand(verifyChecksumsCommand, { rawArgs: ["--node", url] }).then(() => null, (x: unknown) => x);
  expect(e).toBeInstanceOf(CliExit);
  const message = (e as CliExit).message;
  expect(message).toStartWith(`cannot reach the node at ${url}: `);
  expect(message).toContain("is it running");
  expect(message).toContain("a stopped node is checked offline: `svc admin verify-checksums --offline` (data_dir of --config) or `--data-dir DIR`");
  expect((e as CliExit).exitCode).toBe(1);
});
