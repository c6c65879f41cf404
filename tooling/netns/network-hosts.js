import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";

/**
 * Hosts for multi-machine tests on one box: network namespaces joined by veth pairs
 * to a bridge, each with its own address (10.N.0.i/24) and, for the processes run in
 * it, its own host name (a UTS namespace), so that kiln's ranks there see other
 * machines: other addresses, other host names. Traffic stays between the namespaces
 * made here; each host's hosts file names them all. remove() deletes them (the bridge and
 * the hosts files too), also after a failed test.
 * Needs root and iproute2's `ip`; hostsUnavailable() says why not.
 */
/**
 * @typedef {object} NetworkHost
 * @property {string} name The namespace's name, also the host name its processes see.
 * @property {string} address
 * @property {string} link The host's end of its link (inside its namespace).
 */

/** @param {...string} args */
const ip = (...args) => execFileSync("ip", args, { stdio: ["ignore", "pipe", "pipe"] }).toString();

/** Why hosts cannot be made here, or undefined when they can. */
/** @returns {string | undefined} */
export function hostsUnavailable() {
  if (process.getuid?.() !== 0) return "network namespaces need root";
  try {
    execFileSync("unshare", ["--version"], { stdio: "ignore" });
  } catch (err) {
    return `unshare is missing (${err.message.split("\n")[0]})`;
  }
  // A namespace and a bridge made and removed: what create() needs, tried once.
  try {
    NetworkHosts.create(1, "pr").remove();
  } catch (err) {
    return `network namespaces cannot be made here (${err.message.split("\n")[0]})`;
  }
  return undefined;
}

export class NetworkHosts {
  /**
   * @param {NetworkHost[]} hosts
   * @param {string} bridge
   */
  constructor(hosts, bridge) {
    this.hosts = hosts;
    this.bridge = bridge;
  }

  /** `count` hosts on one bridge; `tag` (a few letters) keeps the names of concurrent test files apart. */
  /**
   * @param {number} count
   * @param {string} tag
   * @returns {NetworkHosts}
   */
  static create(count, tag) {
    // Names and the subnet from the process id: two test processes never share them.
    const id = `${tag}${process.pid % 10000}`;
    const subnet = 100 + (process.pid % 100);
    const bridge = `kb${id}`;
    const made = new NetworkHosts([], bridge);
    try {
      ip("link", "add", bridge, "type", "bridge");
      ip("link", "set", bridge, "up");
      for (let i = 0; i < count; i++) {
        const name = `kh${id}-${i}`;
        const link = `kv${id}${i}`;
        const peer = `kp${id}${i}`;
        ip("netns", "add", name);
        made.hosts.push({ name, address: `10.${subnet}.0.${i + 1}`, link });
        ip("link", "add", link, "type", "veth", "peer", "name", peer);
        ip("link", "set", link, "netns", name);
        ip("link", "set", peer, "master", bridge);
        ip("link", "set", peer, "up");
        ip("netns", "exec", name, "ip", "addr", "add", `10.${subnet}.0.${i + 1}/24`, "dev", link);
        ip("netns", "exec", name, "ip", "link", "set", link, "up");
        ip("netns", "exec", name, "ip", "link", "set", "lo", "up");
      }
      // Each host resolves every host's name, its own included (torchrun's c10d rendezvous looks its own up):
      // `ip netns exec` shows /etc/netns/<name>/hosts as the namespace's /etc/hosts.
      const table = ["127.0.0.1 localhost", ...made.hosts.map((h) => `${h.address} ${h.name}`)].join("\n");
      for (const h of made.hosts) {
        mkdirSync(`/etc/netns/${h.name}`, { recursive: true });
        writeFileSync(`/etc/netns/${h.name}/hosts`, `${table}\n`);
      }
    } catch (err) {
      made.remove();
      throw err;
    }
    return made;
  }

  /** The words that run a command on host `i`, in its namespace under its own host name. */
  /** @param {number} i @returns {string[]} */
  prefix(i) {
    const { name } = this.hosts[i];
    return ["ip", "netns", "exec", name, "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', name];
  }

  /** Takes host `i`'s link down (its cable pulled) or up again. */
  /** @param {number} i @param {boolean} up */
  setLink(i, up) {
    const { name, link } = this.hosts[i];
    ip("netns", "exec", name, "ip", "link", "set", link, up ? "up" : "down");
  }

  remove() {
    for (const h of this.hosts) {
      try {
        ip("netns", "delete", h.name);
      } catch {
        // already gone
      }
      rmSync(`/etc/netns/${h.name}`, { recursive: true, force: true });
    }
    try {
      ip("link", "delete", this.bridge);
    } catch {
      // already gone
    }
  }
}
