import type { Logger } from 'pino';
import type { BlockEngineTransport, BundleResultMessage } from './block-engine';

/**
 * Follow the engine's bundle-result stream for as long as the sidecar runs: when it fails, ends or falls silent
 * (the transport reports each as an error), or cannot be opened, it subscribes again after a second and calls
 * `onResubscribe`. Transports without the stream (JSON-RPC) make this a no-op.
 */
export function followBundleResults(
  engine: BlockEngineTransport,
  onResult: (result: BundleResultMessage) => void,
  log: Logger,
  onResubscribe: () => void = () => undefined,
): { stop(): void } {
  let stopping = false;
  let stopResults: (() => void) | null = null;
  let resubscribe: NodeJS.Timeout | null = null;
  const subscribeTo = engine.subscribeBundleResults?.bind(engine);
  if (!subscribeTo) return { stop: () => undefined };

  const retry = () => {
    if (stopping) return;
    resubscribe = setTimeout(() => {
      onResubscribe();
      subscribe();
    }, 1000);
    resubscribe.unref();
  };
  const subscribe = () => {
    if (stopping) return;
    try {
      stopResults = subscribeTo(onResult, (error) => {
        if (stopping) return;
        log.warn({ err: error.message }, 'bundle result stream lost; resubscribing');
        retry();
      });
    } catch (error) {
      log.warn({ err: (error as Error).message }, 'cannot open the bundle result stream; retrying');
      retry();
    }
  };
  subscribe();
  return {
    stop: () => {
      stopping = true;
      if (resubscribe) clearTimeout(resubscribe);
      stopResults?.();
    },
  };
}
