// Builds the page into the Python package's static folder, where the API serves it under /ui/:
// index.html, app.js (the page), app.css, and app-chunk-<hash>.js files loaded when first
// needed (the charts library, ~500 KiB, only by a job's page).
// `node build.mjs` once; `node build.mjs --watch` rebuilds on every change.
import { copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "src", "loom", "ui", "static");

const options = {
  entryPoints: { app: join(here, "src", "main.js") },
  outdir: out,
  bundle: true,
  format: "esm",
  splitting: true,
  chunkNames: "app-chunk-[hash]",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  minify: true,
  sourcemap: false, // the server serves .js, .css and .svg only
  legalComments: "eof", // the bundled packages' licence notices stay with their code
  logLevel: "info",
  metafile: true,
  define: { "process.env.NODE_ENV": '"production"' },
};

await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
for (const name of ["index.html", "favicon.svg"]) {
  await copyFile(join(here, "public", name), join(out, name));
}

if (process.argv.includes("--watch")) {
  const context = await esbuild.context(options);
  await context.watch();
} else {
  const result = await esbuild.build(options);
  for (const [file, { bytes }] of Object.entries(result.metafile.outputs)) {
    console.log(`${file.replace(/^.*static\//, "static/")}: ${(bytes / 1024).toFixed(1)} KiB`);
  }
  await preload(result.metafile);
}

// The chunks app.js imports at once are fetched beside it rather than after it has run: a
// modulepreload link for each in the page (the charts' chunk, loaded later, is left alone).
async function preload(metafile) {
  const [, app] = Object.entries(metafile.outputs).find(([file]) => basename(file) === "app.js");
  const chunks = app.imports.filter((i) => i.kind === "import-statement").map((i) => basename(i.path));
  const links = chunks.map((name) => `<link rel="modulepreload" href="/ui/${name}">`).join("\n");
  const page = join(out, "index.html");
  const text = await readFile(page, "utf8");
  await writeFile(page, text.replace("</head>", `${links}\n</head>`));
}
