// The checked-in JSON Schemas are generated from the zod schemas. Regenerate with `pnpm gen:schema`
// (UPDATE_SCHEMAS=1), then `pnpm format` and review the diff. Compared as parsed JSON, so prettier's
// layout of the file does not matter.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lifecycleEntryJsonSchema, policyJsonSchema } from '../src';

const files: Array<[string, () => Record<string, unknown>]> = [
  ['policy.schema.json', policyJsonSchema],
  ['lifecycle-entry.schema.json', lifecycleEntryJsonSchema],
];

describe.each(files)('schema/%s', (file, generate) => {
  const path = join(__dirname, '..', 'schema', file);
  const generated = `${JSON.stringify(generate(), null, 2)}\n`;

  if (process.env.UPDATE_SCHEMAS === '1') writeFileSync(path, generated);

  it('matches the schema generated from the zod source', () => {
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual(JSON.parse(generated));
  });
});
