// Reconnect delays: exponential from min to max with "equal jitter" (50–100 % of the step), so
// that the nodes of a cluster restarted together do not redial in lockstep.

export function reconnectDelayMs(failuresInRow: number, delayMsMin: number, delayMsMax: number, random: () => number): number {
  const exponent = Math.min(Math.max(failuresInRow - 1, 0), 30);
  const stepMs = Math.min(delayMsMax, delayMsMin * 2 ** exponent);
  return Math.max(1, Math.round(stepMs * (0.5 + 0.5 * random())));
}
