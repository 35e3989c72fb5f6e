#!/usr/bin/env node
// Compile treasury/contracts/*.sol with the pinned solc-js (see package.json)
// and write a byte-reproducible artifacts file.
//
//   node scripts/compile_contracts.mjs [OUTPUT_PATH]
//
// OUTPUT_PATH defaults to treasury/contracts/artifacts.json. Exits non-zero
// (printing the compiler's messages) if compilation reports any error.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const contractsDir = join(repoRoot, "treasury", "contracts");
const outputPath = resolve(process.argv[2] ?? join(contractsDir, "artifacts.json"));
const EVM_VERSION = "cancun"; // py-evm has no osaka, solc's default

let solc;
try {
  solc = createRequire(import.meta.url)("solc");
} catch (err) {
  console.error(`cannot load solc (run \`npm ci\` first): ${err.message}`);
  process.exit(2);
}

// Source unit names are the bare file names, so `import "./X.sol"` resolves
// among them. CRLF is normalised so a Windows checkout gives the same
// metadata hash (and hence the same bytecode).
const sources = {};
for (const file of readdirSync(contractsDir).filter((f) => f.endsWith(".sol")).sort()) {
  sources[file] = { content: readFileSync(join(contractsDir, file), "utf8").replace(/\r\n/g, "\n") };
}
if (Object.keys(sources).length === 0) {
  console.error(`no .sol files in ${contractsDir}`);
  process.exit(1);
}

const input = {
  language: "Solidity",
  sources,
  settings: {
    evmVersion: EVM_VERSION,
    optimizer: { enabled: true, runs: 200 },
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
  },
};

const output = JSON.parse(
  solc.compile(JSON.stringify(input), {
    import: (path) => ({ error: `import not found: ${path} (all sources must live in treasury/contracts/)` }),
  }),
);

const messages = output.errors ?? [];
for (const m of messages) console.error(m.formattedMessage ?? m.message);
if (messages.some((m) => m.severity === "error")) {
  console.error("compilation failed");
  process.exit(1);
}

// Deployable contracts only: abstract contracts and interfaces have no bytecode.
const contracts = {};
for (const file of Object.keys(output.contracts ?? {}).sort()) {
  for (const [name, c] of Object.entries(output.contracts[file])) {
    const bytecode = c.evm?.bytecode?.object ?? "";
    if (bytecode === "") continue;
    if (name in contracts) {
      console.error(`duplicate contract name ${name} (in ${file})`);
      process.exit(1);
    }
    contracts[name] = { abi: c.abi, bytecode: `0x${bytecode}` };
  }
}

const sorted = Object.fromEntries(Object.keys(contracts).sort().map((k) => [k, contracts[k]]));
const artifacts = { compiler: solc.version(), evmVersion: EVM_VERSION, contracts: sorted };
writeFileSync(outputPath, `${JSON.stringify(artifacts, null, 2)}\n`);
console.log(`wrote ${Object.keys(sorted).length} contracts to ${outputPath} (solc ${solc.version()})`);
