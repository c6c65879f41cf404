import { KilnError } from "@kiln/contract";

/** The Hugging Face Hub cannot be reached, or refused a request; nothing was committed. */
export class HubError extends KilnError {
  static override readonly kind: string = "HubError";
}
