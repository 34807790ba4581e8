import { RelayError, isTerminalTxState, txStatusChangedEvent, type EventCursor } from '@solrelay/core';
import { EventHub as Hub } from '../../events/hub';
import type { ServerResponse } from 'node:http';
import type { StoredTx } from '../../store/records';
import type { AppDeps, Routes } from '../deps';

/**
 * The client's routes: `POST /tx/enqueue` (its unusual forms; the ordinary one takes the fast path),
 * `GET /tx/events/:txId` (SSE until a terminal state) and `GET /tx/:txId`.
 */
export function transactionRoutes(app: Routes, deps: Pick<AppDeps, 'relay' | 'hub' | 'now'>): void {
  const { relay, hub } = deps;

  app.post('/tx/enqueue', async (req, res) => {
    const { response, created } = await relay.enqueue(req.body);
    res.status(created ? 202 : 200).json(response);
  });

  app.get('/tx/events/:txId', async (req, res) => {
    const txId = req.params.txId as string;
    // The current state and the subscription are taken at one moment: no change falls between them.
    await relay.withCurrent(txId, (tx, after) => subscribe(txId, tx, res, after));
  });

  function subscribe(txId: string, tx: StoredTx | undefined, res: ServerResponse, after?: EventCursor): void {
    if (!tx) throw new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: txId });
    const current = txStatusChangedEvent({
      tx_id: tx.tx_id,
      state: tx.state,
      bundle_id: tx.attempts[tx.attempts.length - 1]?.bundle_id ?? null,
      tx_signatures: tx.signatures,
      failure: tx.failure,
      ts: (deps.now ?? Date.now)(),
    });
    const terminal = isTerminalTxState(tx.state);
    hub.subscribe(res, {
      initialFrames: [Hub.frame('tx_status_changed', current)],
      endAfterInitial: terminal,
      filter: (event) =>
        event.name === 'tx_status_changed' && (event.data as { tx_id: string }).tx_id === txId,
      closeAfter: (event) => isTerminalTxState((event.data as { state: 'pending' }).state),
      // On an event log: the record's events after the one it shows, replayed from the ring or the table.
      ...(after ? { after, replayTxId: txId } : {}),
    });
  }

  app.get('/tx/:txId', async (req, res) => {
    res.json(await relay.txRecord(req.params.txId as string));
  });
}
