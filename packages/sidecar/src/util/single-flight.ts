/**
 * Runs `work` on request, one run at a time: requests during a run coalesce into exactly one more run after it (so a
 * burst of wake-ups costs at most two runs, and none is lost).
 */
export class SingleFlight {
  private running: Promise<void> | null = null;
  private again = false;

  constructor(private readonly work: () => Promise<void>) {}

  request(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.work().finally(() => {
      this.running = null;
      if (this.again) {
        this.again = false;
        this.request();
      }
    });
  }

  /** Resolves once no run is going (and none was requested meanwhile). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }
}
