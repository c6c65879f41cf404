import { TrainingError } from "@kiln/contract";
import type { StarGroup } from "./star-group.js";

/** How long the ranks get to answer the roll call that names the rank behind a failed collective of another channel. */
const ROLL_CALL_MS = 10_000;

/**
 * The error to report when a collective of a data channel beside the star group
 * (Gloo, NCCL) failed: the star group's own failure, naming a rank, when it has
 * one (a rank that died closes its socket at once); else a roll call through
 * the star group names a rank that stalled; else the channel's own message.
 */
export async function explainChannelFailure(group: StarGroup, channel: string, what: string, err: unknown, timeoutMs: number): Promise<Error> {
  if (err instanceof TrainingError) return err;
  const message = (err as Error).message;
  const known =
    group.failed ??
    (await group.run(`roll call after a failed ${what}`, new Uint8Array(0), () => new Uint8Array(0), Math.min(ROLL_CALL_MS, timeoutMs)).then(
      () => undefined,
      (e: unknown) => (e instanceof TrainingError ? e : undefined),
    ));
  if (known) return new TrainingError(`${known.message}; ${channel}'s ${what} failed: ${message}`, { where: known.where, hint: known.hint });
  return new TrainingError(`${channel}'s ${what} failed: ${message}`, {
    where: `data-parallel rank ${group.rank} of ${group.worldSize}`,
    hint: `every rank answered a roll call afterwards, so the link between them is the likely cause${channel === "Gloo" ? ": set GLOO_SOCKET_IFNAME to the interface the machines share" : ": NCCL_DEBUG=WARN makes NCCL say more"}`,
  });
}
