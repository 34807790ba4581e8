/**
 * The position of a stored event in the fleet's event log (DESIGN §10): the committing transaction's id (`xid8`)
 * and the row's id. Events are read in this order, only below the reader's snapshot xmin, so a reader that has seen
 * cursor c has seen every event before it. On the wire (an SSE id, a `Last-Event-ID`) it is the opaque string
 * `<xid>.<id>`, both decimal. Pure: parsing, printing and ordering.
 */
export interface EventCursor {
  xid: bigint;
  id: bigint;
}

const MAX_U64 = (1n << 64n) - 1n;
const CURSOR_TEXT = /^(\d{1,20})\.(\d{1,19})$/;

/** The cursor an SSE id names, or null for anything that is not one (a ring id of the journal store, garbage). */
export function parseEventCursor(text: string): EventCursor | null {
  const match = CURSOR_TEXT.exec(text);
  if (!match) return null;
  const xid = BigInt(match[1] as string);
  const id = BigInt(match[2] as string);
  // xid8 is unsigned 64-bit, the row id a positive bigint (identity from 1).
  if (xid > MAX_U64 || id > MAX_U64 >> 1n || id < 1n) return null;
  return { xid, id };
}

export function formatEventCursor(cursor: EventCursor): string {
  return `${cursor.xid}.${cursor.id}`;
}

/** Negative, zero or positive as `a` comes before, at or after `b` (the log's order: xid, then id). */
export function compareEventCursors(a: EventCursor, b: EventCursor): number {
  if (a.xid !== b.xid) return a.xid < b.xid ? -1 : 1;
  if (a.id !== b.id) return a.id < b.id ? -1 : 1;
  return 0;
}
