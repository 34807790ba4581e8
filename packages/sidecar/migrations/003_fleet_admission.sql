-- Fleet-wide admission (DESIGN §10: `rate-limit` and `max-queue` hold across the fleet, checked inside the
-- transaction that admits). Several sidecars on one database (RELAY_FLEET) admit an enqueue under one
-- transaction-scoped advisory lock: the live transactions are counted (max-queue) and so are this table's rows of the
-- last 60 s by the database's clock (rate-limit: accepted enqueues per sliding minute, whatever the hosts' clocks
-- say), and the new row here commits with the transaction's or not at all. A separate table, not a column of
-- `transactions`: retention may delete terminal transactions younger than a minute, and a window that lost them would
-- admit more than the limit. Rows older than the window are deleted in batches by the store's upkeep.
CREATE TABLE admissions (
  at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  host_id text
);
CREATE INDEX admissions_at ON admissions (at);

-- Adopted from another host (DESIGN §10, rule 3): the attempts numbered up to this were built by the earlier owner.
-- Such an attempt is resent only as its committed bytes, and stays unsettled until its tip provably cannot land (its
-- blockhash dead, its signature not landed), so no new tip is built beside a tip the earlier owner, perhaps only
-- paused, may still be sending. 0: none.
ALTER TABLE transactions ADD COLUMN inherited_attempts integer NOT NULL DEFAULT 0;
