// A store-only zip writer: what the submit page needs to send a chosen folder as the job's
// code. Stored (not deflated) entries keep it small and fast; the server unpacks either.

// Folders the `loom` CLI leaves out of a job's code too (loom/client/archive.py).
const SKIP = new Set(["__pycache__", ".git", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"]);
const MAX = 0xffffffff; // no zip64: an archive up to 4 GiB

const TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

export function crc32(bytes) {
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) crc = TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function dosTime(ms) {
  const d = new Date(ms || Date.now());
  const year = Math.max(d.getFullYear(), 1980);
  return {
    time: (d.getHours() << 11) | (d.getMinutes() << 5) | (d.getSeconds() >> 1),
    date: ((year - 1980) << 9) | ((d.getMonth() + 1) << 5) | d.getDate(),
  };
}

function header(size, fill) {
  const bytes = new Uint8Array(size);
  fill(new DataView(bytes.buffer));
  return bytes;
}

/** A zip Blob of `entries`: [{ name, data: Uint8Array, modified?: ms }]. */
export function zip(entries) {
  const parts = [];
  const central = [];
  let offset = 0;
  const encoder = new TextEncoder();
  for (const { name, data, modified } of entries) {
    const path = encoder.encode(name);
    const crc = crc32(data);
    const { time, date } = dosTime(modified);
    const common = (v, at) => {
      v.setUint16(at, 20, true); // version needed: 2.0
      v.setUint16(at + 2, 0x0800, true); // names are UTF-8
      v.setUint16(at + 4, 0, true); // stored
      v.setUint16(at + 6, time, true);
      v.setUint16(at + 8, date, true);
      v.setUint32(at + 10, crc, true);
      v.setUint32(at + 14, data.length, true);
      v.setUint32(at + 18, data.length, true);
      v.setUint16(at + 22, path.length, true);
    };
    const local = header(30, (v) => {
      v.setUint32(0, 0x04034b50, true);
      common(v, 4);
    });
    central.push(
      header(46, (v) => {
        v.setUint32(0, 0x02014b50, true);
        v.setUint16(4, (3 << 8) | 20, true); // made on Unix, so the mode below counts
        common(v, 6);
        v.setUint32(38, (0o100644 << 16) >>> 0, true); // a regular file, rw-r--r--
        v.setUint32(42, offset, true);
      }),
      path,
    );
    parts.push(local, path, data);
    offset += local.length + path.length + data.length;
    if (offset > MAX) throw new Error("the code is over 4 GiB; zip it yourself and choose the zip");
  }
  const size = central.reduce((sum, part) => sum + part.length, 0);
  const end = header(22, (v) => {
    v.setUint32(0, 0x06054b50, true);
    v.setUint16(8, entries.length, true);
    v.setUint16(10, entries.length, true);
    v.setUint32(12, size, true);
    v.setUint32(16, offset, true);
  });
  return new Blob([...parts, ...central, end], { type: "application/zip" });
}

/** The path inside the archive of a file picked with a folder input, or null to leave out. */
export function entryName(relativePath) {
  const parts = relativePath.split("/").filter(Boolean);
  if (parts.length > 1) parts.shift(); // the chosen folder itself: its contents go at the root, as with `loom train`
  if (parts.length === 0 || parts.some((part) => SKIP.has(part))) return null;
  return parts.join("/");
}

/** A zip Blob of the files a `webkitdirectory` input gave. */
export async function zipFolder(files) {
  const entries = [];
  for (const file of files) {
    const name = entryName(file.webkitRelativePath || file.name);
    if (name === null) continue;
    entries.push({ name, data: new Uint8Array(await file.arrayBuffer()), modified: file.lastModified });
  }
  if (entries.length === 0) throw new Error("the folder holds no files to send");
  return zip(entries);
}
