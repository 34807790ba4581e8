import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { loadPackageDefinition, type GrpcObject, type ServiceDefinition } from '@grpc/grpc-js';
import { loadSync, type PackageDefinition } from '@grpc/proto-loader';
import protobuf from 'protobufjs';

const PROTO_RELATIVE = join('protos', 'geyser.proto');

/**
 * Find protos/geyser.proto, walking up from this module's directory and then from the working directory. The built
 * package carries its own copy in dist/protos (the build copies the repository's protos/geyser.proto, and tsup shims
 * `__dirname` in the ESM build too), so an installed package finds it next to its module file wherever it is loaded
 * from; under jest the walk from src/geyser reaches the repository's protos/, the file the sidecar reads as well.
 * Pass `protoPath` to point elsewhere.
 */
export function findGeyserProto(): string {
  const starts = [typeof __dirname === 'string' ? __dirname : null, process.cwd()].filter(
    (dir): dir is string => dir !== null,
  );
  for (const start of starts) {
    let dir = resolve(start);
    for (;;) {
      const candidate = join(dir, PROTO_RELATIVE);
      if (existsSync(candidate)) return candidate;
      const parent = dirname(dir);
      if (parent === dir) break;
      dir = parent;
    }
  }
  throw new Error(`cannot find ${PROTO_RELATIVE} above ${starts.join(' or ')}`);
}

const LOADER_OPTIONS = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: false,
  oneofs: true,
} as const;

/**
 * Load the Geyser service definition. Subscribe requests are decoded with protobufjs directly instead of
 * proto-loader's deserializer: prost-based clients (the napi @triton-one/yellowstone-grpc >= 5.0.1) omit the value
 * of a map entry whose message is empty (`slots: {client: {}}`), protobufjs decodes that as null, and proto-loader's
 * toObject then throws "Error deserializing request". Here a null value becomes an empty message.
 */
export function loadGeyserService(protoPath = findGeyserProto()): ServiceDefinition {
  const definition: PackageDefinition = loadSync(protoPath, {
    ...LOADER_OPTIONS,
    includeDirs: [dirname(protoPath)],
  });
  const root = protobuf.loadSync(protoPath);
  const requestType = root.lookupType('geyser.SubscribeRequest');
  const service = definition['geyser.Geyser'] as unknown as Record<
    string,
    { requestDeserialize: (b: Buffer) => unknown }
  >;
  const subscribe = service.Subscribe;
  if (!subscribe) throw new Error('geyser.proto has no Subscribe method');
  subscribe.requestDeserialize = (buffer: Buffer) => {
    const message = requestType.decode(buffer) as unknown as Record<string, unknown>;
    for (const field of requestType.fieldsArray) {
      if (!field.map || !field.resolvedType) continue;
      const entries = message[field.name] as Record<string, unknown> | undefined;
      if (!entries) continue;
      for (const key of Object.keys(entries)) {
        if (entries[key] === null || entries[key] === undefined) {
          entries[key] = (field.resolvedType as protobuf.Type).create();
        }
      }
    }
    return requestType.toObject(message as unknown as protobuf.Message, LOADER_OPTIONS);
  };
  const grpcObject = loadPackageDefinition(definition);
  const geyser = grpcObject.geyser as GrpcObject;
  return (geyser.Geyser as unknown as { service: ServiceDefinition }).service;
}
