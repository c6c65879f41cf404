// The network-namespace hosts of the multi-machine tests: tooling/netns/network-hosts.js, which the benchmarks use too.
export { NetworkHosts, hostsUnavailable, type NetworkHost } from "@kiln/tooling/netns";
