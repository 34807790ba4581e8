import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * TEST-ONLY TLS material for an engine named `engine.relay.test` (RFC 2606's .test: no real host has it): the key
 * is committed here, so the certificate secures nothing. Self-signed, CA:TRUE, SAN DNS:engine.relay.test only (no
 * `localhost`, no IP), valid until 2126 (`openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1
 * -days 36500 -subj /CN=engine.relay.test -addext subjectAltName=DNS:engine.relay.test`).
 *
 * Imported first by the test that uses it: @grpc/grpc-js reads GRPC_DEFAULT_SSL_ROOTS_FILE_PATH once, when it loads,
 * so the certificate becomes the only root the file's gRPC clients trust before anything requires grpc-js.
 */
export const ENGINE_TLS_NAME = 'engine.relay.test';

export const TEST_ONLY_ENGINE_CERT_PEM = `-----BEGIN CERTIFICATE-----
MIIB9zCCAZ2gAwIBAgIUNZgJyIV0E7dkvHr0oAcSSsPvJXwwCgYIKoZIzj0EAwIw
QTEaMBgGA1UEAwwRZW5naW5lLnJlbGF5LnRlc3QxIzAhBgNVBAoMGnNvbHJlbGF5
IHNpZGVjYXIgVEVTVCBPTkxZMCAXDTI2MTEyODAwMzkyNFoYDzIxMjYxMTA0MDAz
OTI0WjBBMRowGAYDVQQDDBFlbmdpbmUucmVsYXkudGVzdDEjMCEGA1UECgwac29s
cmVsYXkgc2lkZWNhciBURVNUIE9OTFkwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC
AAR+/H6yMO/fwkgB/Tl6Eet0IgX3xnqf1ptAJugGVGbi+oRNsTKuP+GOkPqZy7Zd
zBjvWGDv55eHJ7p4qTHJyfzMo3EwbzAdBgNVHQ4EFgQUWQaTBOgL+3nt+vn5GflK
/GAhmj8wHwYDVR0jBBgwFoAUWQaTBOgL+3nt+vn5GflK/GAhmj8wHAYDVR0RBBUw
E4IRZW5naW5lLnJlbGF5LnRlc3QwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQD
AgNIADBFAiBn3OnAxFUODc33JH3CLzx7eVCmBJCqrrCwk3gfAdQrFQIhAJ4sHgED
QcbBN3WVLf66iQh8gfDpBk4ljM2eb7fEJXTU
-----END CERTIFICATE-----
`;

export const TEST_ONLY_ENGINE_KEY_PEM = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg6+yMYLwPIh5G/aRg
tNrbwQLFVyJ7myvqY6xKIDlwG92hRANCAAR+/H6yMO/fwkgB/Tl6Eet0IgX3xnqf
1ptAJugGVGbi+oRNsTKuP+GOkPqZy7ZdzBjvWGDv55eHJ7p4qTHJyfzM
-----END PRIVATE KEY-----
`;

// A stable path (same content each run), as the simulated cluster's own certificate file.
const rootsFile = join(tmpdir(), 'solrelay-sidecar-test-engine-ca.pem');
writeFileSync(rootsFile, TEST_ONLY_ENGINE_CERT_PEM);
process.env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH = rootsFile;
