// One line on a node's WAL archiving, as stats and cluster-status print it.

export interface WalArchiveJson {
  archived_through: number;
  last_archived_segment: string | null;
  last_archived_at: string | null;
  last_failure_at: string | null;
  last_error: string | null;
  /** Absent from a node of an older version: last_failure_at stands in. */
  failing_since?: string | null;
  failures: number;
  segments_waiting: number;
}

export function walArchiveLine(a: WalArchiveJson | null | undefined): string {
  if (a === null || a === undefined) return "off (wal.archive_command is not set)";
  const last = a.last_archived_segment === null ? "nothing archived by this node yet" : `last ${a.last_archived_segment} at ${a.last_archived_at}`;
  const since = a.failing_since ?? a.last_failure_at;
  const failing = a.last_error === null ? "" : `; FAILING since ${since}${since === a.last_failure_at ? "" : ` (last at ${a.last_failure_at})`}: ${a.last_error}`;
  return `archived through ${a.archived_through}, ${last}, ${a.segments_waiting} segment(s) waiting, ${a.failures} failure(s)${failing}`;
}
