// The manifest the submit form writes, and where a server error about a field is shown.
import assert from "node:assert/strict";
import { test } from "node:test";
import { formFieldOf, manifestYaml } from "../src/manifest.js";

const FORM = {
  name: "digits",
  framework: "pytorch",
  command: 'python train.py --note "a: b"',
  learners: "2",
  cpus: "0.5",
  gpus: "",
  memory: "2GiB",
  store: { type: "" },
};

test("the form's values, strings quoted, empty ones left out", () => {
  assert.equal(
    manifestYaml(FORM),
    [
      'name: "digits"',
      'version: "1.0"',
      "learners: 2",
      "cpus: 0.5",
      'memory: "2GiB"',
      "framework:",
      '  name: "pytorch"',
      '  command: "python train.py --note \\"a: b\\""',
      "",
    ].join("\n"),
  );
});

test("a number that is not one goes as text, for the server to name", () => {
  assert.match(manifestYaml({ ...FORM, learners: "two" }), /^learners: "two"$/m);
});

test("a host folder data store", () => {
  const yaml = manifestYaml({ ...FORM, store: { type: "mount_volume", id: "data", data: "digits", path: "/data" } });
  assert.match(yaml, /data_stores:\n {2}- id: "data"\n {4}type: "mount_volume"\n {4}training_data:\n {6}container: "digits"\n {4}connection:\n {6}type: "host_mount"\n {6}path: "\/data"\n$/);
});

test("error fields map to the form's fields", () => {
  assert.equal(formFieldOf("learners"), "learners");
  assert.equal(formFieldOf("framework.command"), "command");
  assert.equal(formFieldOf("framework.name"), "framework");
  assert.equal(formFieldOf("data_stores.0.connection"), "store");
  assert.equal(formFieldOf("", "C102"), "code");
  assert.equal(formFieldOf("priority"), "");
});
