import { useState } from 'react';
import type { DashboardStore } from '../store';

/**
 * Asked once when the API answers 401. The token goes into the client, which sends it as an
 * `Authorization: Bearer` header; it is never put in a URL.
 */
export function TokenPrompt({ store, refused }: { store: DashboardStore; refused: boolean }) {
  const [token, setToken] = useState('');
  return (
    <div className="modal-backdrop">
      <form
        className="modal"
        data-testid="token-prompt"
        onSubmit={(event) => {
          event.preventDefault();
          if (token.trim()) store.setToken(token);
        }}
      >
        <h2>API token required</h2>
        <p>
          This sidecar was started with <code>RELAY_API_TOKEN</code>. Enter the token to read its API.
        </p>
        {refused ? (
          <p className="text-bad" data-testid="token-refused">
            The sidecar refused that token. Check it and try again.
          </p>
        ) : null}
        <input
          type="password"
          name="relay-token"
          autoComplete="off"
          autoFocus
          aria-label="API token"
          placeholder="RELAY_API_TOKEN"
          value={token}
          onChange={(event) => setToken(event.target.value)}
        />
        <button type="submit" disabled={!token.trim()}>
          Connect
        </button>
        <p className="small muted">
          Sent only as an Authorization header; kept in this tab&apos;s session storage.
        </p>
      </form>
    </div>
  );
}
