import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { DashboardStore } from './store';
import './styles.css';

// The API is on the origin that served the page: the sidecar itself, or vite's dev proxy in front of it.
const store = new DashboardStore(window.location.origin);
store.start();

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root');
createRoot(root).render(
  <StrictMode>
    <App store={store} />
  </StrictMode>,
);
