import type { Options } from 'tsup';

/**
 * The one build shape every library package uses: ESM + CJS + declarations for each entry.
 * Packages pass their entry map; nothing else varies, so the exports maps stay uniform.
 */
export function libraryConfig(entry: Record<string, string>, overrides: Partial<Options> = {}): Options {
  return {
    entry,
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
    splitting: false,
    treeshake: true,
    outDir: 'dist',
    ...overrides,
  };
}

/**
 * Copies protos/geyser.proto into the package's dist/protos/ after a build, so a built package carries the proto it
 * loads at run time. Throws when the proto is missing: a package built without it is broken.
 */
export async function copyGeyserProto(): Promise<void> {
  const { copyFile, mkdir, rm, stat } = await import('node:fs/promises');
  const { dirname, join, resolve } = await import('node:path');
  const source = resolve(__dirname, '..', 'protos', 'geyser.proto');
  const target = join(process.cwd(), 'dist', 'protos', 'geyser.proto');
  await mkdir(dirname(target), { recursive: true });
  const existing = await stat(target).catch(() => null);
  if (existing?.isDirectory()) await rm(target, { recursive: true, force: true });
  await copyFile(source, target);
}
