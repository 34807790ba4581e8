import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * TEST-ONLY TLS material for the simnet's gRPC SearcherService. The private key below is public (it is committed
 * to this repository), so this certificate secures nothing: it exists only so jito-ts's `searcherClient()` factory,
 * which always dials TLS, can reach the simnet. Self-signed, CA:TRUE, SAN DNS:localhost, IP:127.0.0.1, IP:::1, valid
 * until 2126 (generated once with `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -days 36500`).
 * A committed certificate rather than one generated at start-up because node:crypto cannot issue X.509 certificates
 * and openssl is not on every machine; it is also stable, which matters because @grpc/grpc-js reads
 * GRPC_DEFAULT_SSL_ROOTS_FILE_PATH once per process and caches it. Pass your own `tls: { cert, key }` to use another.
 */
export const TEST_ONLY_TLS_CERT_PEM = `-----BEGIN CERTIFICATE-----
MIIB9zCCAZygAwIBAgIUV2/7SUNH9gxNsOwAfUjxYiL0i4cwCgYIKoZIzj0EAwIw
ODESMBAGA1UEAwwJbG9jYWxob3N0MSIwIAYDVQQKDBlzb2xyZWxheSBzaW1uZXQg
VEVTVCBPTkxZMCAXDTI2MTEyMTE0MjY1MFoYDzIxMjYxMDI4MTQyNjUwWjA4MRIw
EAYDVQQDDAlsb2NhbGhvc3QxIjAgBgNVBAoMGXNvbHJlbGF5IHNpbW5ldCBURVNU
IE9OTFkwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASEXnWO8R4Zo+fra6LzkhiM
VzWhFI8HtO5ADajxUwn1LIxYgeXPNkJxb3puassUZEkxCN7Sysc9mwpj5vKNwlQ4
o4GBMH8wHQYDVR0OBBYEFEBO1vOJsO2bIXDT6gaJkPMrXpfxMB8GA1UdIwQYMBaA
FEBO1vOJsO2bIXDT6gaJkPMrXpfxMA8GA1UdEwEB/wQFMAMBAf8wLAYDVR0RBCUw
I4IJbG9jYWxob3N0hwR/AAABhxAAAAAAAAAAAAAAAAAAAAABMAoGCCqGSM49BAMC
A0kAMEYCIQCOaJB5IQQR3JjQI6xhuH795TO9BhSelNW4hG06Rp5f1wIhAJ5fcP9c
84/rx5Xtgto5Jzv8IrrpIySlifxHTut+7au3
-----END CERTIFICATE-----
`;

/** TEST ONLY: the private key of {@link TEST_ONLY_TLS_CERT_PEM}. Public, so it protects nothing. */
export const TEST_ONLY_TLS_KEY_PEM = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgckz/QO3FHYwf8CyQ
J7Hgd/UhsZmLsE7dtge9GHiaGT6hRANCAASEXnWO8R4Zo+fra6LzkhiMVzWhFI8H
tO5ADajxUwn1LIxYgeXPNkJxb3puassUZEkxCN7Sysc9mwpj5vKNwlQ4
-----END PRIVATE KEY-----
`;

/**
 * Write a certificate to a stable file in the temp dir (same content, same path) and return the path, for
 * GRPC_DEFAULT_SSL_ROOTS_FILE_PATH. This module must not import @grpc/grpc-js: grpc-js reads that variable once,
 * when it is first loaded, so a process sets it before loading grpc-js.
 */
export function writeCaCertFile(certPem: string = TEST_ONLY_TLS_CERT_PEM): string {
  const digest = createHash('sha256').update(certPem).digest('hex').slice(0, 16);
  const path = join(tmpdir(), `solrelay-simnet-ca-${digest}.pem`);
  writeFileSync(path, certPem);
  return path;
}
