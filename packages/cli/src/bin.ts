import { runCli } from './main';
import { colorEnabled } from './output';

// The `relay` binary: builds the context from this process, runs one command and is the only place that exits.
const context = {
  env: { ...process.env },
  cwd: process.cwd(),
  io: {
    stdout: (text: string) => void process.stdout.write(text),
    stderr: (text: string) => void process.stderr.write(text),
  },
  color: colorEnabled(process.env, Boolean(process.stdout.isTTY)),
};

void runCli(process.argv.slice(2), context).then((code) => {
  // Exit once stdout has flushed, so a piped JSON document is never cut short; nothing left running keeps us here.
  process.stdout.write('', () => process.exit(code));
});
