// One lint config for the workspace. Two rules carry the architecture:
// 1. no package reaches into another package's src/ (only its published exports);
// 2. @solrelay/core stays pure: no I/O modules, no env, no clocks, no timers, no randomness.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

const crossPackageSrc = {
  patterns: [
    { regex: '^@solrelay/[^/]+/src(/|$)', message: 'Import the package by its exports, never its src/.' },
    { regex: '^(\\.\\./){2,}[^./][^/]*/src(/|$)', message: 'Import another package by name, never by path.' },
    { regex: '^(\\.\\./)+(packages|apps)/', message: 'Import another package by name, never by path.' },
  ],
};

export default tseslint.config(
  {
    ignores: ['**/dist/**', '**/node_modules/**', '**/.turbo/**', '**/coverage/**', 'bench/results/**'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: 'module',
      globals: { ...globals.node },
    },
    rules: {
      'no-restricted-imports': ['error', crossPackageSrc],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['**/test/**', '**/*.test.ts'],
    languageOptions: { globals: { ...globals.node, ...globals.jest } },
  },
  {
    // The pure core: decisions only. Clock, slot, randomness and config are inputs.
    files: ['packages/core/src/**/*.ts'],
    ignores: ['packages/core/src/**/*.test.ts'],
    languageOptions: { globals: {} },
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...crossPackageSrc.patterns,
            { regex: '^node:', message: '@solrelay/core does no I/O: node built-ins are not allowed.' },
            {
              regex:
                '^(fs|fs/promises|path|os|http|https|http2|net|tls|dgram|dns|child_process|cluster|worker_threads|crypto|stream|readline|zlib|process|timers|perf_hooks)$',
              message: '@solrelay/core does no I/O: node built-ins are not allowed.',
            },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'process', message: 'core reads no env or process state; pass it in.' },
        { name: 'setTimeout', message: 'core has no timers; the caller drives time.' },
        { name: 'setInterval', message: 'core has no timers; the caller drives time.' },
        { name: 'setImmediate', message: 'core has no timers; the caller drives time.' },
        { name: 'fetch', message: 'core does no I/O.' },
        { name: 'require', message: 'core is ESM source.' },
        { name: 'Buffer', message: 'core runs in browsers too: use Uint8Array.' },
        { name: 'global', message: 'core reads no globals; pass inputs in.' },
        { name: '__dirname', message: 'core does no I/O.' },
        { name: '__filename', message: 'core does no I/O.' },
        { name: 'crypto', message: 'core takes randomness and hashing from its own pure code or inputs.' },
        { name: 'clearTimeout', message: 'core has no timers.' },
        { name: 'clearInterval', message: 'core has no timers.' },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'core takes the clock as an input.' },
        { object: 'Math', property: 'random', message: 'core takes randomness as an input.' },
        { object: 'performance', property: 'now', message: 'core takes the clock as an input.' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'core takes the clock as an input.',
        },
        { selector: "CallExpression[callee.name='Date']", message: 'core takes the clock as an input.' },
        { selector: 'ImportExpression', message: 'core loads nothing at run time.' },
        {
          selector:
            "MemberExpression[object.name='globalThis'][property.name=/^(process|Buffer|crypto|fetch|setTimeout|setInterval|Date|performance)$/]",
          message: 'core reads no globals; pass inputs in.',
        },
      ],
    },
  },
);
