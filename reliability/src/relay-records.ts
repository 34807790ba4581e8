import { get } from '@solrelay/testkit';

/** A transaction's relay record, as `GET /tx/{id}` serves it (the fields the trials check). */
export interface RelayRecord {
  tx_id: string;
  state: string;
  failure: string | null;
  tx_signatures: string[];
  attempts: Array<{
    attempt: number;
    bundle_id: string;
    tip_lamports: number;
    stage: string;
    outcome: string | null;
    slot_submitted?: number | null;
  }>;
  history?: Array<{ state: string; slot: number }>;
  last_error: { code: string; message: string; details: Record<string, unknown> } | null;
}

/**
 * The records of `ids` from one sidecar, `batch` requests at a time: a record, or null for an id it does not know
 * (404). Any other answer throws, unless `unreadable: 'null'` (a fleet's reader, whose peers may be dying) makes it
 * null too.
 */
export async function readRecordsById(
  url: string,
  ids: readonly string[],
  options: { batch?: number; unreadable?: 'throw' | 'null' } = {},
): Promise<Map<string, RelayRecord | null>> {
  const batch = options.batch ?? 24;
  const tolerant = options.unreadable === 'null';
  const out = new Map<string, RelayRecord | null>();
  for (let i = 0; i < ids.length; i += batch) {
    const answers = await Promise.all(
      ids.slice(i, i + batch).map((id) =>
        get(url, `/tx/${id}`).catch((error: unknown) => {
          if (tolerant) return null;
          throw error;
        }),
      ),
    );
    answers.forEach((answer, j) => {
      const id = ids[i + j] as string;
      if (answer?.status === 200) out.set(id, answer.body as RelayRecord);
      else if (answer?.status === 404 || tolerant) out.set(id, null);
      else throw new Error(`GET /tx/${id} answered ${answer?.status}: ${JSON.stringify(answer?.body)}`);
    });
  }
  return out;
}
