#!/usr/bin/env node
/*
 * Load generator built on the reference's own client library (npm zmq-raft's ZmqRaftClient),
 * for `make bench BENCH=cluster`: the same client drives a raftlog cluster and a reference
 * cluster, so the comparison cannot be skewed by a client written for one of them.
 *
 * Why a separate program: bench/loadgen.py speaks the wire from Python; a demanding operator
 * asks how the server fares with the client people actually use against the reference. This
 * program runs phases in order and prints one JSON object (its last stdout line):
 *
 *   node bench/reference_loadgen.js '{"urls": [...], "ident": "...", "phases": [
 *       {"kind": "updates", "inflight": 16, "total": 4000, "size": 100},
 *       {"kind": "read", "prevIndex": 0}]}'
 *
 * "updates": `total` RequestUpdates of `size` bytes, `inflight` of them outstanding at once
 * (`inflight` async workers, each awaiting its previous update: ZmqRaftClient pipelines them
 * over its one DEALER), every one with a fresh request id from the reference's genIdent.
 * Result: {ops, seconds, rate, p50_ms, p99_ms, clientCpu}.
 * "read": `requestEntries(prevIndex, receiver)` of the whole log up to the leader's
 * lastApplied, the receiver only counting the entry buffers it is handed (the reference
 * client hands over raw frames; decoding them is the application's business and equal for
 * both servers). Result: {entries, seconds, rate, batches, clientCpu}.
 *
 * The client is created once (its leader discovery and connection set-up are outside the
 * timings) and closed at the end. Needs NODE_PATH to include the reference's node_modules
 * (bench/bench_cluster.py sets it).
 */
"use strict";

const raft = require("zmq-raft");
const { ZmqRaftClient } = raft.client;
const { genIdent } = raft.utils.id;

const params = JSON.parse(process.argv[2] || "{}");
const RPC_TIMEOUT_MS = params.rpcTimeoutMs || 60000;

function percentile(sorted, q) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))];
}

async function updates(client, phase) {
  const payload = Buffer.alloc(phase.size || 100, 0x70);
  const latencies = new Float64Array(phase.total);
  let issued = 0;
  let done = 0;
  const worker = async () => {
    while (issued < phase.total) {
      issued++;
      const started = process.hrtime.bigint();
      await client.requestUpdate(genIdent("buffer"), payload, RPC_TIMEOUT_MS);
      latencies[done++] = Number(process.hrtime.bigint() - started) / 1e6;
    }
  };
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const workers = [];
  for (let n = 0; n < Math.min(phase.inflight, phase.total); n++) workers.push(worker());
  await Promise.all(workers);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const sorted = Array.from(latencies.subarray(0, done)).sort((a, b) => a - b);
  return {
    kind: "updates",
    inflight: phase.inflight,
    ops: done,
    seconds,
    rate: done / seconds,
    p50_ms: percentile(sorted, 0.5),
    p99_ms: percentile(sorted, 0.99),
    // CPU seconds of the Node client per second (1.0 = one core): the client's own cost
    // bounds the rate it can drive, whichever cluster answers.
    clientCpu: (cpu.user + cpu.system) / 1e6 / seconds,
  };
}

async function read(client, phase) {
  let entries = 0;
  let batches = 0;
  const receiver = (status, chunk) => {
    batches++;
    if (!Buffer.isBuffer(chunk)) entries += chunk.length;
  };
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const complete = await client.requestEntries(
    phase.prevIndex || 0, receiver, RPC_TIMEOUT_MS);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  if (complete !== true) throw new Error("requestEntries ended before the last batch");
  // The client's own CPU share over the read (1.0 = one core busy all along): when it is
  // near 1.0 the client, not the server, sets the rate.
  const clientCpu = (cpu.user + cpu.system) / 1e6 / seconds;
  return { kind: "read", entries, batches, seconds, rate: entries / seconds, clientCpu };
}

(async () => {
  const client = new ZmqRaftClient(params.urls, { secret: params.ident, lazy: false });
  await client.requestConfig(RPC_TIMEOUT_MS);
  const results = [];
  for (const phase of params.phases || []) {
    if (phase.kind === "updates") results.push(await updates(client, phase));
    else if (phase.kind === "read") results.push(await read(client, phase));
    else throw new Error(`unknown phase kind: ${phase.kind}`);
  }
  client.close();
  process.stdout.write("\n" + JSON.stringify({ results }) + "\n", () => process.exit(0));
})().catch((err) => {
  process.stderr.write("reference_loadgen failed: " + ((err && err.stack) || err) + "\n",
    () => process.exit(1));
});
