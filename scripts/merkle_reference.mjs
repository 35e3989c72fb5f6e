#!/usr/bin/env node
// The JavaScript reference for treasury/evm/merkle.py: @openzeppelin/merkle-tree.
//
//   node scripts/merkle_reference.mjs < request.json
//
// request: {"leafEncoding": [...], "values": [[...], ...], "load": <a dump, optional>,
//           "repeat": n (optional: time building the tree and every proof n times)}
// answer:  {"dump", "proofs" (one per value), "loaded": {"root", "verified"} (for "load"),
//           "ms": [one time per repeat, excluding node's start and the JSON parsing]}
import { createRequire } from "node:module";

const { StandardMerkleTree } = createRequire(import.meta.url)("@openzeppelin/merkle-tree");
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const { leafEncoding, values } = request;

const build = () => {
  const tree = StandardMerkleTree.of(values, leafEncoding);
  return { tree, proofs: values.map((_, i) => tree.getProof(i)) };
};
const ms = [];
for (let i = 0; i < (request.repeat ?? 0); i++) {
  const start = process.hrtime.bigint();
  build();
  ms.push(Number(process.hrtime.bigint() - start) / 1e6);
}
const answer = { ms };
if (!request.repeat) {
  const { tree, proofs } = build();
  Object.assign(answer, { dump: tree.dump(), proofs });
}
if (request.load) {
  const loaded = StandardMerkleTree.load(request.load);
  const verified = [...loaded.entries()].map(([i, value]) =>
    StandardMerkleTree.verify(loaded.root, request.load.leafEncoding, value, loaded.getProof(i)),
  );
  answer.loaded = { root: loaded.root, verified };
}
process.stdout.write(JSON.stringify(answer));
