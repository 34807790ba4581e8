-- Fleet-wide limits in one statement each (DESIGN §10): admission (max-queue, rate-limit) and spend-limit.
--
-- Migration 003 admitted an enqueue in a transaction the sidecar drove statement by statement: take the admission lock, count, insert, commit, each a round trip. The lock was held
-- across those round trips, so a host that stopped between them (a SIGSTOP, a cut link to the database: the
-- reliability suite's fleet trials) held every host's enqueues until `idle_in_transaction_session_timeout` ended its
-- transaction. Now the enqueue is one autocommit statement that calls this function first: the lock is taken, the
-- limits are checked and the row is inserted by the server without waiting on the client, and released at the commit
-- that follows at once. A client that goes away mid-statement only loses the answer (a commit of unknown outcome, which
-- the store re-reads).
--
-- VOLATILE: each query in it takes a new snapshot (PostgreSQL 15 docs §38.7, "Function Volatility Categories"), so the
-- counts, taken after the lock, see every admission committed by the previous holder, as the separate statements did.
-- Both functions also refuse to run outside READ COMMITTED (RLY05): under REPEATABLE READ or SERIALIZABLE (a role's or
-- database's default_transaction_isolation) every query of the statement shares the snapshot taken before the lock,
-- and a limit could be passed unseen.
-- Refusals raise (the statement then writes nothing): RLY02 the queue is full (max-queue: live transactions), RLY03
-- the rate limit (admissions of the last 60 s by the database's clock; DETAIL: milliseconds until the oldest leaves
-- the window). The admission row itself is inserted by the calling statement, only when its transaction row was.
CREATE FUNCTION relay_admit(max_queue bigint, rate_limit bigint) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  active bigint;
  recent bigint;
  retry_ms float8;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'relay_admit needs READ COMMITTED, not %', current_setting('transaction_isolation')
      USING ERRCODE = 'RLY05';
  END IF;
  PERFORM pg_advisory_xact_lock(1919249505); -- 0x72656c61, "rela": the fleet's admission lock
  SELECT count(*) INTO active FROM transactions WHERE terminal_at IS NULL;
  IF active >= max_queue THEN
    RAISE EXCEPTION 'the fleet holds % live transactions (max-queue %)', active, max_queue
      USING ERRCODE = 'RLY02';
  END IF;
  SELECT count(*), extract(epoch FROM min(at) + interval '60 seconds' - clock_timestamp()) * 1000
    INTO recent, retry_ms
    FROM admissions WHERE at > clock_timestamp() - interval '60 seconds';
  IF recent >= rate_limit THEN
    RAISE EXCEPTION 'the fleet admitted % enqueues in the last 60 s (rate-limit %)', recent, rate_limit
      USING ERRCODE = 'RLY03', DETAIL = coalesce(round(retry_ms), 1000)::text;
  END IF;
END
$$;

-- spend-limit across the fleet, the same way: a change that reserves lamports (a new attempt's tip, a raised one) is
-- one autocommit statement that calls this first. Under the fleet's spend lock (0x72656c6179, "relay") it sums what
-- is reserved or paid since `since_ms` (the rolling hour) and raises RLY04 when `adding` would pass `spend_limit`
-- (DETAIL: what is reserved or paid already); the reservation rows the statement then writes are seen by the next
-- holder. Before this the lock was held across four round trips (lock, sum, change, commit): a host paused or cut off
-- in between stalled every host's sends until idle_in_transaction_session_timeout.
CREATE FUNCTION relay_spend_check(since_ms float8, spend_limit bigint, adding bigint) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  spent bigint;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'relay_spend_check needs READ COMMITTED, not %', current_setting('transaction_isolation')
      USING ERRCODE = 'RLY05';
  END IF;
  PERFORM pg_advisory_xact_lock(491327873401);
  SELECT coalesce(sum(lamports), 0) INTO spent FROM spend_reservations
    WHERE released_at IS NULL AND reserved_at >= to_timestamp(since_ms / 1000);
  IF spent + adding > spend_limit THEN
    RAISE EXCEPTION 'spend-limit % would be passed: % lamports in the window with this attempt', spend_limit,
      spent + adding USING ERRCODE = 'RLY04', DETAIL = spent::text;
  END IF;
END
$$;
