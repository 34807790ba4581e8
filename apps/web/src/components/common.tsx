import { useState, type ReactNode } from 'react';
import { shortId, shortTxId } from '../format';

/** A titled box; `actions` sit at the right of the title bar. */
export function Panel(props: {
  title: string;
  className?: string;
  actions?: ReactNode;
  children: ReactNode;
  testId?: string;
}) {
  return (
    <section className={`panel ${props.className ?? ''}`} data-testid={props.testId} aria-label={props.title}>
      <header className="panel-title">
        <h2>{props.title}</h2>
        {props.actions ? <div className="panel-actions">{props.actions}</div> : null}
      </header>
      <div className="panel-body">{props.children}</div>
    </section>
  );
}

export type Tone = 'good' | 'bad' | 'warn' | 'idle';

/** A health dot always comes with words, so the state reads without colour too. */
export function Dot({ tone, label }: { tone: Tone; label?: string }) {
  return <span className={`dot dot-${tone}`} role="img" aria-label={label ?? tone} title={label ?? tone} />;
}

/** Copies text; `navigator.clipboard` needs a secure context, so fall back to a hidden textarea. */
async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.style.position = 'fixed';
  area.style.opacity = '0';
  document.body.appendChild(area);
  area.select();
  document.execCommand('copy');
  area.remove();
}

/**
 * A monospace id shortened for tables; the full id is in the tooltip and the `data-full` attribute, and a
 * click copies it (without also triggering the row's click).
 */
export function Id({ value, kind = 'plain' }: { value: string; kind?: 'tx' | 'plain' }) {
  const [copied, setCopied] = useState(false);
  const shown = kind === 'tx' ? shortTxId(value) : shortId(value);
  return (
    <button
      type="button"
      className={`id ${copied ? 'id-copied' : ''}`}
      title={`${value}\n(click to copy)`}
      data-full={value}
      onClick={(event) => {
        event.stopPropagation();
        void copyText(value).then(
          () => {
            setCopied(true);
            setTimeout(() => setCopied(false), 900);
          },
          () => undefined,
        );
      }}
    >
      {copied ? 'copied' : shown}
    </button>
  );
}

const STAGE_TONES: Record<string, string> = {
  pending: 'stage-pending',
  submitted: 'stage-submitted',
  landed: 'stage-landed',
  processed: 'stage-processed',
  confirmed: 'stage-confirmed',
  finalized: 'stage-finalized',
  failed: 'stage-failed',
  expired: 'stage-failed',
};

/** A transaction state or bundle stage as a coloured tag. */
export function StageTag({ stage }: { stage: string }) {
  return <span className={`tag ${STAGE_TONES[stage] ?? ''}`}>{stage}</span>;
}
