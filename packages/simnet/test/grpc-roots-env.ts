// Imported first by the TLS test: @grpc/grpc-js reads GRPC_DEFAULT_SSL_ROOTS_FILE_PATH once, when it loads, so the
// variable has to be in place before anything requires grpc-js (as it would be in a sidecar's environment).
import { writeCaCertFile } from '../src/engine/tls';

process.env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH = writeCaCertFile();
