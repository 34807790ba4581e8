-- Webhook delivery order and ids (review of #28: M1, M6, m11).
--
-- Order per transaction and endpoint across a crash (M1): a host leases a row only when no older row of the same
-- (endpoint, tx_id) that is still owed is held by someone else (another host, or an earlier run of this one whose
-- lease has not run out). The lease query looks for those older rows with this index, one probe per row it takes.
CREATE INDEX webhook_outbox_per_tx ON webhook_outbox (endpoint, tx_id, id) WHERE done_at IS NULL;

-- One row per message and endpoint in a host's memory (M6): the lease query finds a row whose webhook-id this host
-- already holds for that endpoint (a row written before settlement ids named their transaction, when two
-- transactions of one packed bundle shared `msg_<bundle>_<stage>`) and ends it as a 'duplicate' in the same
-- statement, instead of leasing a row nobody tracks. Receivers dedupe on the webhook-id, so a second delivery under
-- the same id would have been dropped anyway. Not a UNIQUE index: rows written before this migration may repeat.
CREATE INDEX webhook_outbox_per_message ON webhook_outbox (endpoint, webhook_id) WHERE done_at IS NULL;
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_outcome_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_outcome_check
  CHECK (outcome IN ('delivered', 'expired', 'unconfigured', 'duplicate'));

-- The dispatcher's retry window counts from `created_at` (m11). now() is the time the inserting transaction began
-- (PostgreSQL: "the start time of the current transaction", the same for every row it writes), which a change that
-- waited on a row lock can give a row written after rows of other transactions with later ids. clock_timestamp()
-- is the time the row itself was written.
ALTER TABLE webhook_outbox ALTER COLUMN created_at SET DEFAULT clock_timestamp();
