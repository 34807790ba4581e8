import { join } from 'node:path';
import { build } from 'esbuild';

// The dashboard bundles the client for browsers: it must build for platform=browser with no Node built-in and no
// web3.js pulled in (web3.js is detected structurally, never imported).
test('bundles for the browser without node: imports, Node built-ins, Buffer or web3.js', async () => {
  const result = await build({
    entryPoints: [join(__dirname, '..', 'src', 'index.ts')],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    write: false,
    logLevel: 'silent',
    metafile: true,
  });
  expect(result.errors).toEqual([]);
  const code = result.outputFiles[0]?.text ?? '';
  expect(code).toContain('/internal/events');
  expect(code).not.toMatch(/["']node:/);
  expect(code).not.toMatch(/require\(["'](fs|http|https|net|crypto|stream|buffer|url|os|path)["']\)/);
  expect(code).not.toMatch(/\bBuffer\.from\b/);
  const inputs = Object.keys(result.metafile.inputs);
  expect(inputs.some((path) => path.includes('@solana/web3.js'))).toBe(false);
  expect(inputs.some((path) => path.includes('eventsource'))).toBe(true);
}, 20_000);
