-- relay's PostgreSQL schema, first draft (DESIGN §10): what PgTxStore (src/store/pg-store.ts) reads and writes.
-- Unreleased, so anything here may still change before release. Applied by `relay db migrate` in one transaction
-- under an advisory lock; the runner records it in schema_migrations. Times are timestamptz (the database clock
-- decides leases); lamports, slots and block heights are bigint. A record's nested parts the store reads whole
-- (history, decision, timeline, ...), events, webhook payloads and lifecycle entries are json, not jsonb: they come
-- back exactly as written, key order included (jsonb reorders keys, and these are served and signed as written).

-- Host sessions: the fencing token of a fleet. Each start registers (host_id, epoch) with a new epoch; the heartbeat
-- moves lease_expires_at only while the session is live; a session that ended or whose lease passed is dead.
CREATE SEQUENCE host_epoch_seq AS bigint;

CREATE TABLE host_sessions (
  host_id          text        NOT NULL,
  epoch            bigint      NOT NULL DEFAULT nextval('host_epoch_seq'),
  started_at       timestamptz NOT NULL DEFAULT now(),
  heartbeat_at     timestamptz NOT NULL DEFAULT now(),
  lease_expires_at timestamptz NOT NULL,
  ended_at         timestamptz,
  -- What admission sums over live hosts (send rate, free budget), published with each heartbeat.
  capacity         jsonb       NOT NULL DEFAULT '{}',
  PRIMARY KEY (host_id, epoch),
  CHECK (lease_expires_at >= started_at)
);
ALTER SEQUENCE host_epoch_seq OWNED BY host_sessions.epoch;
-- At most one session per host id not yet ended: a second start with the same RELAY_HOST_ID ends the old session
-- only if its lease passed, and otherwise refuses, naming it.
CREATE UNIQUE INDEX host_sessions_one_open ON host_sessions (host_id) WHERE ended_at IS NULL;

-- Transactions: one row per accepted request (StoredTx). The owner columns are the fence every write checks
-- (... WHERE owner_host = $me AND owner_epoch = $epoch); null while nobody owns it (waiting to be claimed).
CREATE TABLE transactions (
  tx_id                 text        PRIMARY KEY,
  -- Acceptance order: lists of records (live, all) come oldest first, as the local stores give them.
  seq                   bigint      GENERATED ALWAYS AS IDENTITY,
  state                 text        NOT NULL
    CHECK (state IN ('pending', 'submitted', 'landed', 'processed', 'confirmed', 'finalized', 'failed', 'expired')),
  priority              text        NOT NULL CHECK (priority IN ('low', 'normal', 'high')),
  -- Claiming orders by priority (high first) then deadline.
  priority_rank         smallint    NOT NULL
    GENERATED ALWAYS AS (CASE priority WHEN 'high' THEN 0 WHEN 'normal' THEN 1 ELSE 2 END) STORED,
  tip_mode              text        NOT NULL CHECK (tip_mode IN ('auto', 'included')),
  max_tip               bigint      CHECK (max_tip >= 0),
  -- Dedupe by first signature (idempotent enqueue, fleet-wide): the first signature of the first user transaction.
  first_signature       text        NOT NULL,
  signatures            text[]      NOT NULL,
  blockhashes           text[]      NOT NULL,
  nonce_accounts        text[]      NOT NULL,
  fee_payers            text[]      NOT NULL,
  -- The user transactions' wire bytes, base64, bundle order; null once terminal.
  wires                 text[],
  enqueued_at           timestamptz NOT NULL,
  enqueued_slot         bigint      NOT NULL,
  enqueued_block_height bigint,
  expires_at_slot       bigint      NOT NULL,
  retries               integer     NOT NULL DEFAULT 0 CHECK (retries >= 0),
  stopped               boolean     NOT NULL DEFAULT false,
  failure               text
    CHECK (failure IN ('fee_too_low', 'dropped', 'simulation_failed', 'invalid_bundle', 'insufficient_funds')),
  landed_slot           bigint,
  last_error            json,
  -- TxHistoryEntry[] ({state, slot, ts}), appended by each transition.
  history               json        NOT NULL DEFAULT '[]',
  owner_host            text,
  owner_epoch           bigint,
  -- Adopted by takeover from a host whose session died.
  inherited             boolean     NOT NULL DEFAULT false,
  -- Bumped by every change: a compare-and-set handle besides the owner fence.
  version               bigint      NOT NULL DEFAULT 1,
  updated_at            timestamptz NOT NULL DEFAULT now(),
  terminal_at           timestamptz,
  CONSTRAINT transactions_first_signature_key UNIQUE (first_signature),
  CHECK (first_signature = signatures[1]),
  CHECK ((owner_host IS NULL) = (owner_epoch IS NULL)),
  CHECK ((terminal_at IS NOT NULL) = (state IN ('finalized', 'failed', 'expired')))
);
-- Claiming: unowned work waiting to be sent, priority then deadline (FOR UPDATE SKIP LOCKED).
CREATE INDEX transactions_claimable ON transactions (priority_rank, expires_at_slot)
  WHERE state = 'pending' AND NOT stopped AND owner_host IS NULL;
-- A host's own transactions (adoption after restart, takeover sweep).
CREATE INDEX transactions_owned ON transactions (owner_host, owner_epoch) WHERE terminal_at IS NULL;
-- max-queue counts non-terminal rows; rate-limit counts enqueues of the last minute.
CREATE INDEX transactions_active ON transactions (state) WHERE terminal_at IS NULL;
CREATE INDEX transactions_enqueued_at ON transactions (enqueued_at);
-- A dead slot un-lands what landed in it.
CREATE INDEX transactions_landed_slot ON transactions (landed_slot) WHERE terminal_at IS NULL AND landed_slot IS NOT NULL;
-- Retention of terminal records, oldest first (in the order they ended; seq breaks ties).
CREATE INDEX transactions_terminal_at ON transactions (terminal_at, seq) WHERE terminal_at IS NOT NULL;

-- Attempts: one row per bundle built for a transaction (StoredAttempt).
CREATE TABLE attempts (
  tx_id                       text        NOT NULL REFERENCES transactions (tx_id) ON DELETE CASCADE,
  attempt                     integer     NOT NULL CHECK (attempt >= 1),
  bundle_id                   text        NOT NULL,
  -- Bundle ids this attempt had before its tip was signed again (still findable by id).
  previous_bundle_ids         text[]      NOT NULL DEFAULT '{}',
  stage                       text        NOT NULL
    CHECK (stage IN ('journaled', 'submitted', 'landed', 'processed', 'confirmed', 'finalized', 'failed')),
  outcome                     text
    CHECK (outcome IN ('fee_too_low', 'dropped', 'simulation_failed', 'invalid_bundle', 'insufficient_funds')),
  tip_lamports                bigint      NOT NULL CHECK (tip_lamports >= 0),
  -- The signed tip transaction, base64; committed before any send, dropped once settled. Null for "tip":"included".
  tip_tx                      text,
  tip_signature               text,
  tip_account                 text,
  tipper                      text,
  tip_last_valid_block_height bigint,
  bundle_signatures           text[]      NOT NULL,
  -- Packing: the riders ([{tx_id, signatures}]) and their wire bytes, bundle order; wires dropped when settled.
  passengers                  json,
  passenger_wires             text[],
  created_at                  timestamptz NOT NULL,
  created_slot                bigint      NOT NULL,
  slot_submitted              bigint,
  target_slot                 bigint,
  window_end_slot             bigint,
  leader                      text,
  slot_landed                 bigint,
  floor_at_submit             json        NOT NULL,
  decision                    json        NOT NULL,
  timeline                    json        NOT NULL DEFAULT '{}',
  reserved_lamports           bigint      NOT NULL DEFAULT 0 CHECK (reserved_lamports >= 0),
  released                    boolean     NOT NULL DEFAULT false,
  leaked                      boolean     NOT NULL DEFAULT false,
  send_errors                 integer     NOT NULL DEFAULT 0,
  -- The session that built (signed) this attempt: re-signing an aged tip is a compare-and-set within that epoch.
  built_by_host               text,
  built_by_epoch              bigint,
  settled_at                  timestamptz,
  PRIMARY KEY (tx_id, attempt),
  CHECK ((settled_at IS NOT NULL) = (stage IN ('finalized', 'failed')))
);
-- No second tip: at most one unsettled attempt per transaction, whoever writes it.
CREATE UNIQUE INDEX attempts_one_unsettled ON attempts (tx_id) WHERE stage NOT IN ('finalized', 'failed');
CREATE UNIQUE INDEX attempts_bundle_id ON attempts (bundle_id);
CREATE INDEX attempts_previous_bundle_ids ON attempts USING gin (previous_bundle_ids);
CREATE INDEX attempts_tip_signature ON attempts (tip_signature) WHERE tip_signature IS NOT NULL;
-- Attempts that ended unleaked, by the slot they were built at: a tip of an ended transaction may still land late.
CREATE INDEX attempts_ended_unleaked ON attempts (created_slot) WHERE stage = 'failed' AND NOT leaked;
-- Tips in flight per tipper (fleet-wide reservations against a tipper's balance).
CREATE INDEX attempts_unsettled_tipper ON attempts (tipper) WHERE stage NOT IN ('finalized', 'failed');

-- Spend counted against spend-limit (rolling hour), keyed like the journal's ledger (tx_id#attempt). Kept apart from
-- attempts, without a foreign key, so retention of old transactions never forgets spend still inside the hour.
CREATE TABLE spend_reservations (
  tx_id       text        NOT NULL,
  attempt     integer     NOT NULL,
  tipper      text,
  reserved_at timestamptz NOT NULL,
  lamports    bigint      NOT NULL CHECK (lamports >= 0),
  -- Set when the attempt provably paid nothing; cleared again if its tip is found paid later.
  released_at timestamptz,
  PRIMARY KEY (tx_id, attempt)
);
-- The rolling hour's sum (reserved_at >= cutoff, not released) and pruning (reserved_at < cutoff, released or not)
-- both walk this one index.
CREATE INDEX spend_reservations_window ON spend_reservations (reserved_at) INCLUDE (lamports, released_at);

-- Transactions that left the queue without landing, by reason (the journal's eviction counters).
CREATE TABLE eviction_counts (
  reason text   PRIMARY KEY,
  count  bigint NOT NULL DEFAULT 0
);

-- Events: what SSE follows on PostgreSQL (store/pg-events.ts); a change's webhook deliveries and lifecycle entries
-- are rows of their own tables, written in the same transaction. The cursor is (xid, id): a reader takes rows whose
-- xid is below its snapshot's xmin (every transaction that could still add a lower cursor has ended), ordered by
-- (xid, id), so none is skipped however commits interleave; an SSE id is that pair (`<xid>.<id>`), valid on any host
-- and across restarts. events_tx serves a transaction's own stream (its newest event, a replay of its events).
-- Partitioned by day of created_at: retention drops whole partitions, never deletes row by row. The default
-- partition takes rows no daily partition covers, so an insert never fails for want of one.
CREATE TABLE events (
  id         bigint      GENERATED ALWAYS AS IDENTITY,
  xid        xid8        NOT NULL DEFAULT pg_current_xact_id(),
  created_at timestamptz NOT NULL DEFAULT now(),
  name       text        NOT NULL,
  tx_id      text,
  host_id    text,
  payload    json        NOT NULL
) PARTITION BY RANGE (created_at);
CREATE TABLE events_default PARTITION OF events DEFAULT;
CREATE INDEX events_cursor ON events (xid, id);
CREATE INDEX events_tx ON events (tx_id, xid, id) WHERE tx_id IS NOT NULL;

-- Creates the daily partitions of events from today (UTC) to `days_ahead` days on; run by the store's maintenance.
CREATE FUNCTION relay_events_add_partitions(days_ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  day date;
  created integer := 0;
BEGIN
  FOR i IN 0..days_ahead LOOP
    day := (now() AT TIME ZONE 'UTC')::date + i;
    IF to_regclass(format('events_%s', to_char(day, 'YYYYMMDD'))) IS NULL THEN
      EXECUTE format(
        'CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
        format('events_%s', to_char(day, 'YYYYMMDD')),
        (day::timestamp AT TIME ZONE 'UTC'),
        ((day + 1)::timestamp AT TIME ZONE 'UTC'));
      created := created + 1;
    END IF;
  END LOOP;
  RETURN created;
END $$;

-- Drops the daily partitions of events wholly older than `keep_from`; returns how many it dropped.
CREATE FUNCTION relay_events_drop_partitions(keep_from timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  part record;
  dropped integer := 0;
BEGIN
  FOR part IN
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'events'::regclass AND c.relname ~ '^events_[0-9]{8}$'
      AND (to_date(substring(c.relname FROM 8), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC' <= keep_from
  LOOP
    EXECUTE format('DROP TABLE %I', part.relname);
    dropped := dropped + 1;
  END LOOP;
  RETURN dropped;
END $$;

SELECT relay_events_add_partitions(2);

-- Webhook deliveries owed: one row per configured endpoint per webhook event (tx_status_changed, bundle_settled),
-- inserted by the change that caused the event, in its transaction. Delivered from here by leasing rows (the lease
-- columns: whichever host holds an unexpired lease delivers the row; a lease of a host that stopped runs out), at
-- least once, in order per transaction and endpoint (a host takes rows in id order and sends a transaction's rows to
-- an endpoint one after the other). `webhook_id` is the Standard Webhooks id, the same as the local outbox gives
-- (core's webhookIdsOfChange). A row is done once delivered or given up (`outcome`); done rows are deleted in batches
-- by the store's maintenance.
CREATE TABLE webhook_outbox (
  id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  endpoint         text        NOT NULL,
  tx_id            text,
  webhook_id       text        NOT NULL,
  event_xid        xid8        NOT NULL,
  event_id         bigint      NOT NULL,
  event_name       text        NOT NULL,
  payload          json        NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  -- Failed attempts so far, and the last failure's reason.
  attempts         integer     NOT NULL DEFAULT 0,
  last_error       text,
  lease_host       text,
  lease_epoch      bigint,
  lease_expires_at timestamptz,
  done_at          timestamptz,
  outcome          text        CHECK (outcome IN ('delivered', 'expired', 'unconfigured')),
  UNIQUE (endpoint, event_xid, event_id),
  CHECK ((lease_host IS NULL) = (lease_expires_at IS NULL)),
  CHECK ((done_at IS NULL) = (outcome IS NULL))
);
-- Leasing: rows still owed, oldest first.
CREATE INDEX webhook_outbox_owed ON webhook_outbox (id) WHERE done_at IS NULL;
-- Retention: done rows, oldest first.
CREATE INDEX webhook_outbox_done ON webhook_outbox (done_at) WHERE done_at IS NOT NULL;

-- The fleet's lifecycle log: one whole entry (as LIFECYCLE_PATH writes it) per bundle stage change; what
-- GET /lifecycle and GET /bundle/:id read on PostgreSQL. Entries older than the retention are deleted in batches by
-- the store's maintenance (lifecycle_entries_written).
CREATE TABLE lifecycle_entries (
  seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  bundle_id  text        NOT NULL,
  tx_id      text        NOT NULL,
  attempt    integer     NOT NULL,
  stage      text        NOT NULL
    CHECK (stage IN ('submitted', 'landed', 'processed', 'confirmed', 'finalized', 'failed')),
  host_id    text,
  written_at timestamptz NOT NULL DEFAULT now(),
  entry      json        NOT NULL
);
CREATE INDEX lifecycle_entries_bundle ON lifecycle_entries (bundle_id, seq);
CREATE INDEX lifecycle_entries_tx ON lifecycle_entries (tx_id, seq);
CREATE INDEX lifecycle_entries_written ON lifecycle_entries (written_at);
