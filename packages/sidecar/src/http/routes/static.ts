import { existsSync } from 'node:fs';
import { join } from 'node:path';
import express, { type Express } from 'express';
import type { AppDeps, Routes } from '../deps';
import { openApiDocument } from '../openapi';

/**
 * The built dashboard at `/`, when its files are present. Mounted before the token check: the dashboard's static
 * files need no token; its API calls carry it. Requests it has no file for fall through to the routes.
 */
export function dashboardFiles(app: Pick<Express, 'use'>, deps: Pick<AppDeps, 'webDist'>): void {
  if (deps.webDist && existsSync(join(deps.webDist, 'index.html'))) {
    app.use(express.static(deps.webDist, { index: 'index.html', fallthrough: true }));
  }
}

/** `GET /openapi.json`: the OpenAPI 3.1 document of this API (behind the token, like every route but `/healthz`). */
export function openApiRoute(app: Routes): void {
  app.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument());
  });
}
