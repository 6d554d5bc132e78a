// Imported first by cli/index.ts, and so by main.ts: output that is not a terminal gets no
// colour codes (citty reads NO_COLOR once, when it is loaded).

if (!process.stdout.isTTY && process.env.NO_COLOR === undefined) process.env.NO_COLOR = "1";
