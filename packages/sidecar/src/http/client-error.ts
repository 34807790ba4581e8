import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { RelayError } from '@solrelay/core';

/**
 * Requests node's HTTP parser refuses (bad framing, raw bytes in the URL, oversize headers) never reach a route:
 * answer them with a relay error body too, instead of node's bare 400.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const relayError =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? new RelayError('RELAY_E_REQUEST_HEADERS_TOO_LARGE', {})
      : new RelayError('RELAY_E_REQUEST_MALFORMED_HTTP', {
          reason: String(error.code ?? error.message).slice(0, 80),
        });
  const body = JSON.stringify(relayError.toBody());
  socket.end(
    `HTTP/1.1 ${relayError.status} ${STATUS_CODES[relayError.status] ?? 'Error'}\r\n` +
      `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `connection: close\r\n\r\n${body}`,
  );
}
