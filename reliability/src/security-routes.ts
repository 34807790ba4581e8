import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The API's routes, from the sidecar's own description of itself (GET /openapi.json) and from the express
 * registrations in its source, so the suites that must cover every route (the token matrix, the fuzz) take their
 * list from the API rather than from a copy that a new route could skip.
 */

export interface ApiRoute {
  /** Upper-case HTTP method. */
  method: string;
  /** The OpenAPI path, parameters as `{name}`. */
  path: string;
  /** `METHOD /path` with every parameter written `{}`: comparable across OpenAPI and express spellings. */
  key: string;
  /** The 200 answer is an event stream. */
  stream: boolean;
  /** Declared without security (`security: []`): no token needed. */
  public: boolean;
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'];

/** `METHOD /path` with `{name}` and `:name` parameters both written `{}`. */
export function routeKey(method: string, path: string): string {
  return `${method.toUpperCase()} ${path.replace(/\{[^}/]+\}|:[A-Za-z_][A-Za-z0-9_]*/g, '{}')}`;
}

/** Every operation of an OpenAPI document. */
export function openApiRoutes(document: unknown): ApiRoute[] {
  const paths = (document as { paths?: Record<string, Record<string, unknown>> } | null)?.paths;
  if (!paths || typeof paths !== 'object') throw new Error('not an OpenAPI document: no "paths"');
  const routes: ApiRoute[] = [];
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (!METHODS.includes(method)) continue;
      const op = operation as {
        security?: unknown[];
        responses?: Record<string, { content?: Record<string, unknown> }>;
      };
      routes.push({
        method: method.toUpperCase(),
        path,
        key: routeKey(method, path),
        stream: Object.keys(op.responses?.['200']?.content ?? {}).includes('text/event-stream'),
        public: Array.isArray(op.security) && op.security.length === 0,
      });
    }
  }
  return routes;
}

/** packages/sidecar/src/http: `app.ts` composes the API, `routes/*.ts` register its routes. */
export const HTTP_SOURCE = join(__dirname, '..', '..', 'packages', 'sidecar', 'src', 'http');

/** The text of every file that registers routes: `app.ts` and each route group. */
function httpSources(): string {
  const routes = join(HTTP_SOURCE, 'routes');
  return [join(HTTP_SOURCE, 'app.ts'), ...readdirSync(routes).map((name) => join(routes, name))]
    .map((file) => readFileSync(file, 'utf8'))
    .join('\n');
}

/** The `app.get('/path', ...)` style registrations of the sidecar's express app, as route keys. */
export function sourceRoutes(source = httpSources()): string[] {
  const keys: string[] = [];
  for (const match of source.matchAll(
    /\bapp\.(get|post|put|patch|delete|head|options|all)\(\s*(['"`])(\/[^'"`]*)\2/g,
  )) {
    keys.push(routeKey(match[1]!, match[3]!));
  }
  return keys;
}

/** The fuzz suite's label for a route (`GET /tx/:id`), from its OpenAPI path. */
export function fuzzLabel(route: Pick<ApiRoute, 'method' | 'path'>): string {
  return `${route.method} ${route.path.replace(/\{[^}/]+\}/g, ':id')}`;
}
