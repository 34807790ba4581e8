-- Fleet-wide admission in one statement (DESIGN §10). Migration 003 admitted an enqueue in a transaction the sidecar
-- drove statement by statement: take the admission lock, count, insert, commit, each a round trip. The lock was held
-- across those round trips, so a host that stopped between them (a SIGSTOP, a cut link to the database: the
-- reliability suite's fleet trials) held every host's enqueues until `idle_in_transaction_session_timeout` ended its
-- transaction. Now the enqueue is one autocommit statement that calls this function first: the lock is taken, the
-- limits are checked and the row is inserted by the server without waiting on the client, and released at the commit
-- that follows at once. A client that goes away mid-statement only loses the answer (a commit of unknown outcome, which
-- the store re-reads).
--
-- VOLATILE: each query in it takes a new snapshot (PostgreSQL 15 docs §38.7, "Function Volatility Categories"), so the
-- counts, taken after the lock, see every admission committed by the previous holder, as the separate statements did.
-- Refusals raise (the statement then writes nothing): RLY02 the queue is full (max-queue: live transactions), RLY03
-- the rate limit (admissions of the last 60 s by the database's clock; DETAIL: milliseconds until the oldest leaves
-- the window). The admission row itself is inserted by the calling statement, only when its transaction row was.
CREATE FUNCTION relay_admit(max_queue bigint, rate_limit bigint) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  active bigint;
  recent bigint;
  retry_ms float8;
BEGIN
  PERFORM pg_advisory_xact_lock(1919246433); -- 0x72656c61, "rela": the fleet's admission lock
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
