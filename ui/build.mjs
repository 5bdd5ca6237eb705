// Builds the page into the Python package's static folder, where the API serves it under /ui/:
// index.html, app.js (the page), app.css, and app-chunk-<hash>.js files loaded when first
// needed (the charts library, ~500 KiB, only by a job's page).
// `node build.mjs` once; `node build.mjs --watch` rebuilds on every change.
import { copyFile, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
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
  legalComments: "none",
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
}
