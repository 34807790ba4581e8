-- Several sidecars on one database (RELAY_FLEET; DESIGN §10): fleet-wide admission, the attempts a transaction
-- inherited from another host, and no new row under a session that is no longer live.

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

-- A new transaction is inserted only by a live host session (DESIGN §10): the session whose lease the database's clock
-- says is still running, not ended. A host checks its own lease before each write, but a write can wait for a pooled
-- connection, or a process can stop, between that check and the insert; a row inserted then would belong to a session
-- already gone. The lease is compared with the clock at the insert itself (clock_timestamp(), not the transaction's
-- start: an admission waits for its lock first). (Changes to an existing row need no such check: their compare-and-set carries the owner, and a row
-- still owned by a lapsed session is the sweep's to move, serialized with that write on the row.)
CREATE FUNCTION relay_owner_live() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.owner_host IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM host_sessions
    WHERE host_id = NEW.owner_host AND epoch = NEW.owner_epoch AND ended_at IS NULL
      AND lease_expires_at > clock_timestamp()
  ) THEN
    RAISE EXCEPTION 'host session % (epoch %) is not live', NEW.owner_host, NEW.owner_epoch
      USING ERRCODE = 'RLY01';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER transactions_owner_live BEFORE INSERT ON transactions
  FOR EACH ROW EXECUTE FUNCTION relay_owner_live();
