// Types of the BrowserHive behavior host object (contracts.md §A.4, §C.5), visible to every
// capture script compiled by devstack.tscompile. Preload scripts run without it at runtime.

/** The host object BrowserHive injects before behaviors run (main frame only). */
declare var __bh: {
  /** Script id → that script's `options` from the request (unvalidated; undefined when absent). */
  opts: Record<string, Record<string, unknown> | undefined>;
  /** Cooperative time budget left for behaviors, in ms (nothing enforces it). */
  remainingMs: number;
  /** Record one result for script `id`; the host adds the id and the elapsed ms. */
  report(id: string, data: unknown): void;
};
