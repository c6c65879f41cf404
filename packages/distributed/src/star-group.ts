import net from "node:net";
import { TrainingError } from "@kiln/contract";
import { type Frame, FrameReader, FrameType, frameHeader } from "./frame-reader.js";
import { type Combine, type CombineEach, sumScalarsInRankOrder } from "./rank-order-reductions.js";

export interface StarGroupOptions {
  rank: number;
  worldSize: number;
  /** Rank 0 listens here; the other ranks connect to it. */
  host: string;
  port: number;
  /** Milliseconds connecting, and each collective, may take before the group fails. */
  timeoutMs: number;
}

/** A collective on rank 0: the parts received so far, and rank 0's own call once it is made. */
interface Gathering {
  parts: (Uint8Array | undefined)[];
  call?: { what: string; combine: CombineEach; resolve: (r: Uint8Array) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };
}

interface Waiting {
  resolve: (r: Uint8Array) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

/** Leaves wait this much longer than rank 0 so that, when a third rank stalls, rank 0's report naming it arrives first. */
const LEAF_PATIENCE = 1.5;

/**
 * Ranks joined in a star over TCP: every collective gathers each rank's part at
 * rank 0, which combines them (in rank order: the result does not depend on
 * arrival order) and sends the result back (the same to every rank, or each
 * rank its own). Collectives are numbered in call order and several may be in
 * flight, finishing in any order. Any failure (a rank that disconnects,
 * stalls past the timeout, or breaks the protocol) fails every pending and later
 * collective on every rank with one TrainingError naming the rank that caused it.
 */
export class StarGroup {
  private seq = 0;
  private failure: TrainingError | undefined;
  private closing = false;
  private readonly gatherings = new Map<number, Gathering>();
  private readonly waiting = new Map<number, Waiting>();
  private readonly failureListeners: ((failure: TrainingError) => void)[] = [];

  private constructor(
    readonly rank: number,
    readonly worldSize: number,
    readonly timeoutMs: number,
    /** Rank 0: the socket of each other rank; elsewhere: [rank 0's socket]. */
    private readonly peers: (net.Socket | undefined)[],
    /** Each rank's address, as rank 0 sees it (failures name the host of the rank that failed). */
    private readonly hosts: readonly string[],
  ) {
    peers.forEach((socket, peer) => socket && this.attach(socket, peer));
  }

  /** Joins the group: rank 0 waits for every other rank to connect, the others connect to rank 0 (retrying until the timeout). */
  static async connect(o: StarGroupOptions): Promise<StarGroup> {
    checkRank(o.rank, o.worldSize);
    if (o.rank === 0) {
      const { peers, hosts } = await acceptRanks(o);
      return new StarGroup(0, o.worldSize, o.timeoutMs, peers, hosts);
    }
    const { socket, hosts } = await joinRankZero(o);
    return new StarGroup(o.rank, o.worldSize, o.timeoutMs, [socket], hosts);
  }

  /**
   * Runs collective `what`: this rank's `part` goes in, the combined result comes
   * out (the same bytes on every rank). The collective takes its number when
   * called, before `part` is ready, so collectives match across ranks in call order.
   */
  run(what: string, part: Uint8Array | Promise<Uint8Array>, combine: Combine, timeoutMs = this.timeoutMs): Promise<Uint8Array> {
    return this.runEach(what, part, (parts) => new Array<Uint8Array>(this.worldSize).fill(combine(parts)), timeoutMs);
  }

  /** Like run, but rank 0 answers each rank r with its own result, `combine(parts)[r]` (reduce-scatter: rank r gets only its chunk). */
  runEach(what: string, part: Uint8Array | Promise<Uint8Array>, combine: CombineEach, timeoutMs = this.timeoutMs): Promise<Uint8Array> {
    if (this.failure) return Promise.reject(this.failure);
    const seq = this.seq++;
    return Promise.resolve(part).then((bytes) => this.start(seq, what, bytes, combine, timeoutMs));
  }

  /** Host f64 numbers summed (or averaged) over the ranks in rank order: the same values on every rank. */
  async allReduceScalars(values: Float64Array, op: "sum" | "mean"): Promise<Float64Array> {
    const result = await this.run(`all-reduce (${op}) of ${values.length} host numbers`, new Uint8Array(values.slice().buffer), sumScalarsInRankOrder(op, this.worldSize));
    return new Float64Array(result.buffer, result.byteOffset, values.length);
  }

  /** Resolves when every rank has reached it. */
  async barrier(): Promise<void> {
    await this.run("barrier", new Uint8Array(0), () => new Uint8Array(0));
  }

  /** Calls `listener` once when the group fails (at once if it has already). */
  onFailure(listener: (failure: TrainingError) => void): void {
    if (this.failure) listener(this.failure);
    else this.failureListeners.push(listener);
  }

  /** The failure that ended the group (naming the rank that caused it), if it has failed. */
  get failed(): TrainingError | undefined {
    return this.failure;
  }

  /** The address of this machine that the group's connections use (what other ranks can reach it at). */
  get localAddress(): string {
    const socket = this.peers.find((s) => s !== undefined);
    return plainAddress(socket?.localAddress ?? "127.0.0.1");
  }

  /** Closes every connection; collectives called later fail. */
  close(): void {
    this.closing = true;
    this.fail(this.rank, "the communicator was closed");
    for (const s of this.peers) s?.end();
  }

  private start(seq: number, what: string, part: Uint8Array, combine: CombineEach, timeoutMs: number): Promise<Uint8Array> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<Uint8Array>((resolve, reject) => {
      if (this.rank === 0) {
        const g = this.gathering(seq);
        g.parts[0] = part;
        const timer = setTimeout(() => this.stalled(seq, timeoutMs), timeoutMs);
        g.call = { what, combine, resolve, reject, timer };
        this.complete(seq);
        return;
      }
      const timer = setTimeout(
        () => this.fail(0, `rank 0 did not answer ${what} (collective #${seq}) within ${seconds(timeoutMs * LEAF_PATIENCE)}: it stalled or is far behind`),
        timeoutMs * LEAF_PATIENCE,
      );
      this.waiting.set(seq, { resolve, reject, timer });
      send(this.peers[0]!, FrameType.Part, seq, this.rank, part);
    });
  }

  private attach(socket: net.Socket, peer: number): void {
    socket.setNoDelay(true);
    const reader = new FrameReader((frame) => this.received(peer, frame));
    socket.on("data", (chunk: Buffer) => reader.push(chunk));
    socket.on("error", () => undefined); // 'close' follows and reports it
    socket.on("close", () => {
      if (this.closing) return;
      if (this.rank === 0) this.fail(peer, `rank ${peer} disconnected: its process exited or was killed`);
      else this.fail(0, "lost the connection to rank 0: its process exited or was killed");
    });
  }

  private received(peer: number, frame: Frame): void {
    if (this.rank === 0 && frame.type === FrameType.Part) {
      const g = this.gathering(frame.seq);
      if (g.parts[peer] !== undefined) return this.fail(peer, `rank ${peer} sent collective #${frame.seq} twice`);
      g.parts[peer] = frame.payload;
      return this.complete(frame.seq);
    }
    if (this.rank !== 0 && frame.type === FrameType.Result) {
      const w = this.waiting.get(frame.seq);
      if (!w) return this.fail(0, `rank 0 answered collective #${frame.seq}, which this rank has not started`);
      this.waiting.delete(frame.seq);
      clearTimeout(w.timer);
      return w.resolve(frame.payload);
    }
    if (this.rank !== 0 && frame.type === FrameType.Abort) {
      const { rank, message } = JSON.parse(new TextDecoder().decode(frame.payload)) as { rank: number; message: string };
      return this.fail(rank, `${message} (reported by rank 0)`);
    }
    this.fail(peer, `rank ${peer} sent an unexpected frame (type ${frame.type})`);
  }

  private gathering(seq: number): Gathering {
    let g = this.gatherings.get(seq);
    if (!g) this.gatherings.set(seq, (g = { parts: new Array<Uint8Array | undefined>(this.worldSize) }));
    return g;
  }

  /** Rank 0: once every part of collective `seq` is in, combines them and answers every rank. */
  private complete(seq: number): void {
    const g = this.gatherings.get(seq);
    if (!g?.call) return;
    for (let r = 0; r < this.worldSize; r++) if (g.parts[r] === undefined) return;
    this.gatherings.delete(seq);
    clearTimeout(g.call.timer);
    let results: readonly Uint8Array[];
    try {
      results = g.call.combine(g.parts as Uint8Array[]);
    } catch (err) {
      return this.fail(0, `combining ${g.call.what} failed: ${(err as Error).message}`);
    }
    for (let r = 1; r < this.worldSize; r++) send(this.peers[r]!, FrameType.Result, seq, 0, results[r]);
    g.call.resolve(results[0]);
  }

  /** Rank 0: collective `seq` timed out; the first rank missing from it is named. */
  private stalled(seq: number, timeoutMs: number): void {
    const g = this.gatherings.get(seq);
    if (!g?.call) return;
    let missing = 0;
    while (g.parts[missing] !== undefined) missing++;
    this.fail(missing, `rank ${missing} did not reach ${g.call.what} (collective #${seq}) within ${seconds(timeoutMs)}: it stalled, is far behind, or runs different code`);
  }

  /** Fails the group (once): every pending collective rejects, and rank 0 tells every other rank which rank failed. */
  private fail(culprit: number, message: string): void {
    if (this.failure) return;
    const seenBy = culprit === this.rank ? "" : `, seen by rank ${this.rank}`;
    const host = this.hosts[culprit] ? ` on ${this.hosts[culprit]}` : "";
    this.failure = new TrainingError(message, {
      where: `data-parallel rank ${culprit} of ${this.worldSize}${host}${seenBy}`,
      hint: culprit === this.rank ? undefined : `see rank ${culprit}'s own output for why it stopped; checkpoints written so far are complete, and --resume auto continues from the newest`,
    });
    if (this.rank === 0 && !this.closing) {
      const notice = new TextEncoder().encode(JSON.stringify({ rank: culprit, message }));
      for (let r = 1; r < this.worldSize; r++) if (r !== culprit && this.peers[r] && !this.peers[r]!.destroyed) send(this.peers[r]!, FrameType.Abort, 0, 0, notice);
    }
    for (const g of this.gatherings.values()) {
      if (g.call) clearTimeout(g.call.timer);
      g.call?.reject(this.failure);
    }
    this.gatherings.clear();
    for (const w of this.waiting.values()) {
      clearTimeout(w.timer);
      w.reject(this.failure);
    }
    this.waiting.clear();
    for (const listener of this.failureListeners.splice(0)) listener(this.failure);
  }
}

function send(socket: net.Socket, type: FrameType, seq: number, rank: number, payload: Uint8Array): void {
  socket.cork();
  socket.write(frameHeader(type, seq, rank, payload.byteLength));
  if (payload.byteLength > 0) socket.write(payload);
  socket.uncork();
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

function checkRank(rank: number, worldSize: number): void {
  if (!Number.isSafeInteger(worldSize) || worldSize < 1) throw new RangeError(`world size must be a positive integer, got ${worldSize}`);
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= worldSize) throw new RangeError(`rank ${rank} is outside [0, ${worldSize})`);
}

/** An address as a socket reports it, without the IPv4-mapped prefix. */
function plainAddress(address: string | undefined): string {
  return address?.startsWith("::ffff:") ? address.slice(7) : (address ?? "");
}

/**
 * Rank 0: listens on host:port until every other rank has said hello, then welcomes them
 * all, telling each the address of every rank (its own as the others reach it).
 */
async function acceptRanks(o: StarGroupOptions): Promise<{ peers: (net.Socket | undefined)[]; hosts: string[] }> {
  if (o.worldSize === 1) return { peers: [undefined], hosts: [] }; // a group of one: nothing to listen for
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(new TrainingError(`rank 0 cannot listen on ${o.host}:${o.port} (${err.code ?? err.message})`, { where: "--master-addr/--master-port (MASTER_ADDR, MASTER_PORT)", hint: "choose a free port on an address of this machine (under torchrun, kiln's rank 0 listens on MASTER_PORT + 1, or on KILN_MASTER_PORT when set)" })),
    );
    server.listen(o.port, o.host, () => resolve());
  });
  const peers = new Array<net.Socket | undefined>(o.worldSize);
  const hosts: string[] = [];
  try {
    const joined = await new Promise<(net.Socket | undefined)[]>((resolve, reject) => {
      const timer = setTimeout(() => {
        const missing = [...Array(o.worldSize).keys()].filter((r) => r > 0 && !peers[r]);
        reject(new TrainingError(`rank${missing.length > 1 ? "s" : ""} ${missing.join(", ")} did not connect to ${o.host}:${o.port} within ${seconds(o.timeoutMs)}`, {
          where: `data-parallel rank ${missing[0]} of ${o.worldSize}`,
          hint: "start every rank with the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT, each with its own RANK",
        }));
      }, o.timeoutMs);
      server.on("connection", (socket) => {
        socket.on("error", () => undefined);
        const reader = new FrameReader((frame) => {
          const hello = frame.type === FrameType.Hello ? (JSON.parse(new TextDecoder().decode(frame.payload)) as { rank: number; worldSize: number }) : undefined;
          const why =
            hello === undefined ? "it did not start with a hello"
            : hello.worldSize !== o.worldSize ? `it has WORLD_SIZE ${hello.worldSize}, rank 0 has ${o.worldSize}`
            : !(hello.rank > 0 && hello.rank < o.worldSize) ? `its RANK ${hello.rank} is outside 1..${o.worldSize - 1}`
            : peers[hello.rank] ? `rank ${hello.rank} is already connected`
            : undefined;
          socket.removeAllListeners("data");
          if (why !== undefined) {
            send(socket, FrameType.Abort, 0, 0, new TextEncoder().encode(JSON.stringify({ rank: hello?.rank ?? -1, message: `rank 0 refused a connection: ${why}` })));
            socket.end();
            return;
          }
          peers[hello!.rank] = socket;
          if (peers.filter(Boolean).length === o.worldSize - 1) {
            clearTimeout(timer);
            hosts.push(plainAddress(peers[1]!.localAddress), ...peers.slice(1).map((p) => plainAddress(p!.remoteAddress)));
            const welcome = new TextEncoder().encode(JSON.stringify({ hosts }));
            for (const s of peers) if (s) send(s, FrameType.Welcome, 0, 0, welcome);
            resolve(peers);
          }
        });
        socket.on("data", (chunk: Buffer) => reader.push(chunk));
      });
    });
    return { peers: joined, hosts };
  } catch (err) {
    for (const s of peers) s?.destroy();
    throw err;
  } finally {
    server.close();
  }
}

/** Ranks other than 0: connects to rank 0 (retrying while it is not listening yet), says hello, and waits to be welcomed (with every rank's address). */
async function joinRankZero(o: StarGroupOptions): Promise<{ socket: net.Socket; hosts: string[] }> {
  const deadline = Date.now() + o.timeoutMs;
  const unreachable = (why: string) =>
    new TrainingError(`rank ${o.rank} could not join rank 0 at ${o.host}:${o.port} within ${seconds(o.timeoutMs)}: ${why}`, {
      where: `data-parallel rank 0 of ${o.worldSize}, seen by rank ${o.rank}`,
      hint: "check that rank 0 runs and that MASTER_ADDR and MASTER_PORT point at it",
    });
  for (;;) {
    const socket = await new Promise<net.Socket | Error>((resolve) => {
      const s = net.connect(o.port, o.host, () => resolve(s));
      s.once("error", (err) => resolve(err));
    });
    if (socket instanceof Error) {
      if (Date.now() > deadline) throw unreachable((socket as NodeJS.ErrnoException).code ?? socket.message);
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    send(socket, FrameType.Hello, 0, o.rank, new TextEncoder().encode(JSON.stringify({ rank: o.rank, worldSize: o.worldSize })));
    const answer = await new Promise<Frame | Error>((resolve) => {
      const timer = setTimeout(() => resolve(new Error("rank 0 accepted the connection but did not welcome it")), Math.max(0, deadline - Date.now()));
      const reader = new FrameReader((frame) => {
        clearTimeout(timer);
        resolve(frame);
      });
      socket.on("data", (chunk: Buffer) => reader.push(chunk));
      socket.once("close", () => {
        clearTimeout(timer);
        resolve(new Error("rank 0 closed the connection"));
      });
    });
    socket.removeAllListeners("data");
    socket.removeAllListeners("close");
    if (answer instanceof Error) {
      socket.destroy();
      throw unreachable(answer.message);
    }
    if (answer.type !== FrameType.Welcome) {
      socket.destroy();
      const { message } = JSON.parse(new TextDecoder().decode(answer.payload)) as { message: string };
      throw new TrainingError(message, { where: `data-parallel rank ${o.rank} of ${o.worldSize}`, hint: "start every rank with the same WORLD_SIZE and its own RANK" });
    }
    socket.removeAllListeners("error");
    const hosts = answer.payload.byteLength > 0 ? ((JSON.parse(new TextDecoder().decode(answer.payload)) as { hosts?: string[] }).hosts ?? []) : [];
    return { socket, hosts };
  }
}
