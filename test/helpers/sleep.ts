/** Resolves after `ms` milliseconds: the one sleep of the tests and their child processes. */
export const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));
