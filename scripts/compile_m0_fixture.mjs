#!/usr/bin/env node
// Compile the M0 contracts vendored in tests/fixtures/m0/ with the solc versions their
// upstream repositories pin (npm aliases in package.json) and write a byte-reproducible
// artifacts file.
//
//   node scripts/compile_m0_fixture.mjs [OUTPUT_PATH]
//
// OUTPUT_PATH defaults to tests/fixtures/m0/artifacts.json. Each build mirrors its
// repository's foundry.toml (solc version, EVM version, optimizer runs). Source unit
// names are paths under tests/fixtures/m0/, laid out as the upstream checkouts with their
// git submodules, so the vendored files compile unedited. Exits non-zero (printing the
// compiler's messages) on any error.
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const fixtureDir = join(repoRoot, "tests", "fixtures", "m0");
const outputPath = resolve(process.argv[2] ?? join(fixtureDir, "artifacts.json"));
const OZ = "evm-m-extensions/lib/common/lib/openzeppelin-contracts-upgradeable/lib/openzeppelin-contracts/contracts/";

// One build per upstream foundry profile. `contracts` names what goes into the artifacts
// (file => contract names): what the fixture deploys, and the swap adapter for its ABI.
const BUILDS = [
  {
    // m0-foundation/protocol, [profile.production]
    solc: "solc-0.8.23",
    roots: ["protocol"],
    evmVersion: "shanghai",
    runs: 999999,
    contracts: { "protocol/src/MToken.sol": ["MToken"] },
  },
  {
    // m0-foundation/evm-m-extensions, [profile.default] (its deploy scripts use it)
    solc: "solc-0.8.26",
    roots: ["evm-m-extensions", "doubles"],
    evmVersion: "cancun",
    runs: 19999,
    remappings: [`@openzeppelin/contracts/=${OZ}`],
    contracts: {
      "evm-m-extensions/src/swap/SwapFacility.sol": ["SwapFacility"],
      "evm-m-extensions/src/projects/jmi/JMIExtension.sol": ["JMIExtension"],
      "evm-m-extensions/src/swap/UniswapV3SwapAdapter.sol": ["UniswapV3SwapAdapter"],
      [`${OZ}proxy/transparent/TransparentUpgradeableProxy.sol`]: ["TransparentUpgradeableProxy"],
      [`${OZ}proxy/transparent/ProxyAdmin.sol`]: ["ProxyAdmin"],
      "doubles/TestRegistrar.sol": ["TestRegistrar"],
    },
  },
];

function solFiles(dir) {
  const found = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...solFiles(path));
    else if (name.endsWith(".sol")) found.push(relative(fixtureDir, path).split(sep).join("/"));
  }
  return found;
}

const require = createRequire(import.meta.url);
const contracts = {};
const compilers = {};
for (const build of BUILDS) {
  let solc;
  try {
    solc = require(build.solc);
  } catch (err) {
    console.error(`cannot load ${build.solc} (run \`npm ci\` first): ${err.message}`);
    process.exit(2);
  }
  // CRLF is normalised so a Windows checkout gives the same metadata hash.
  const sources = {};
  for (const root of build.roots) {
    for (const unit of solFiles(join(fixtureDir, root))) {
      sources[unit] = { content: readFileSync(join(fixtureDir, unit), "utf8").replace(/\r\n/g, "\n") };
    }
  }
  const input = {
    language: "Solidity",
    sources,
    settings: {
      evmVersion: build.evmVersion,
      optimizer: { enabled: true, runs: build.runs },
      remappings: build.remappings ?? [],
      outputSelection: Object.fromEntries(
        Object.entries(build.contracts).map(([file, names]) => [
          file,
          Object.fromEntries(names.map((n) => [n, ["abi", "evm.bytecode.object"]])),
        ]),
      ),
    },
  };
  const output = JSON.parse(
    solc.compile(JSON.stringify(input), {
      import: (path) => ({ error: `import not found: ${path} (vendor it under tests/fixtures/m0/)` }),
    }),
  );
  const messages = output.errors ?? [];
  const errors = messages.filter((m) => m.severity === "error");
  for (const m of errors) console.error(m.formattedMessage ?? m.message);
  if (errors.length > 0) {
    console.error(`compilation with ${build.solc} failed`);
    process.exit(1);
  }
  compilers[build.solc] = solc.version();
  for (const [file, names] of Object.entries(build.contracts)) {
    for (const name of names) {
      const c = output.contracts?.[file]?.[name];
      if (!c?.evm?.bytecode?.object) {
        console.error(`no bytecode for ${name} in ${file}`);
        process.exit(1);
      }
      contracts[name] = {
        source: file,
        compiler: solc.version(),
        evmVersion: build.evmVersion,
        optimizerRuns: build.runs,
        abi: c.abi,
        bytecode: `0x${c.evm.bytecode.object}`,
      };
    }
  }
}

const sorted = Object.fromEntries(Object.keys(contracts).sort().map((k) => [k, contracts[k]]));
writeFileSync(outputPath, `${JSON.stringify({ compilers, contracts: sorted }, null, 2)}\n`);
console.log(`wrote ${Object.keys(sorted).length} contracts to ${outputPath} (${Object.values(compilers).join(", ")})`);
