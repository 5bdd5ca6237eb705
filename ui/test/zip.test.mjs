// The store-only zip writer: CRC-32, the layout Python's zipfile reads, folder paths.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { crc32, entryName, zip } from "../src/zip.js";

test("CRC-32 of the standard check string", () => {
  assert.equal(crc32(new TextEncoder().encode("123456789")), 0xcbf43926);
});

test("a folder's own name is dropped and caches are left out", () => {
  assert.equal(entryName("code/train.py"), "train.py");
  assert.equal(entryName("code/pkg/mod.py"), "pkg/mod.py");
  assert.equal(entryName("code/pkg/__pycache__/mod.pyc"), null);
  assert.equal(entryName("code/.git/HEAD"), null);
});

test("python's zipfile reads what zip() writes", async (t) => {
  const encoder = new TextEncoder();
  const blob = zip([
    { name: "train.py", data: encoder.encode("print('hi')\n") },
    { name: "pkg/données.txt", data: encoder.encode("é") },
  ]);
  const path = join(mkdtempSync(join(tmpdir(), "zip-")), "code.zip");
  writeFileSync(path, new Uint8Array(await blob.arrayBuffer()));
  let listing;
  try {
    const script = "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; "
      + "print(*[f'{i.filename}:{i.file_size}:{oct(i.external_attr >> 16)}' for i in z.infolist()])";
    listing = execFileSync("python3", ["-c", script, path]).toString().trim();
  } catch (error) {
    if (error.code === "ENOENT") return t.skip("python3 is not installed");
    throw error;
  }
  assert.equal(listing, "train.py:12:0o100644 pkg/données.txt:2:0o100644");
});
