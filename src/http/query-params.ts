// Each query parameter at most once, on every route of both ports. A route reads a parameter
// with URLSearchParams.get, which answers the first of two: `?lease_ms=1000&lease_ms=60000`
// paused writes for a second and said nothing of the other value. A repeated one is refused
// with 400, naming it, before any route runs; a follower relays the query as it came.

import { Elysia } from "elysia";
import { SvcError } from "../util/errors.ts";
import { errorResponse } from "./errors.ts";

/** The first name given twice in `url`'s query (as URLSearchParams decodes names), or null. */
export function repeatedQueryParameter(url: string): string | null {
  const start = url.indexOf("?");
  // One parameter cannot repeat: the common request (none, or one) costs two searches.
  if (start === -1 || url.indexOf("&", start) === -1) return null;
  const hash = url.indexOf("#", start);
  const seen = new Set<string>();
  for (const name of new URLSearchParams(url.slice(start + 1, hash === -1 ? undefined : hash)).keys()) {
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return null;
}

export function singleQueryParameters() {
  return new Elysia({ name: "svc-single-query-parameters" }).onRequest(({ request }) => {
    const name = repeatedQueryParameter(request.url);
    if (name === null) return;
    return errorResponse(new SvcError("BAD_REQUEST", `the query parameter ${JSON.stringify(name)} is given twice; svc reads each parameter once`, {
      hint: `nothing was done; give ${JSON.stringify(name)} once, with the one value meant`,
      details: { parameter: name },
    }));
  });
}
