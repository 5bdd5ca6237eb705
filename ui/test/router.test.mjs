// Hash routes: the pages, their parameters, and what is not a page.
import assert from "node:assert/strict";
import { test } from "node:test";
import { href, parse } from "../src/router.js";

test("the pages and their parameters", () => {
  assert.deepEqual(parse(""), { page: "jobs", param: null, key: "jobs/" });
  assert.deepEqual(parse("#/experiments"), { page: "experiments", param: null, key: "experiments/" });
  assert.deepEqual(parse("#/experiments/digits-hpo"), { page: "experiments", param: "digits-hpo", key: "experiments/digits-hpo" });
  assert.equal(parse("#/pipelines/run-abc").param, "run-abc");
  assert.equal(parse("#/capacity").page, "capacity");
  assert.equal(parse("#/users").page, "users");
  assert.equal(parse(href("models", "a b/c")).param, "a b/c");
  assert.deepEqual(parse(href("models", "digits", "versions", "3")), {
    page: "models",
    param: "digits",
    ref: "3",
    key: "models/digits/versions/3",
  });
});

test("what is not a page", () => {
  for (const hash of ["#/nowhere", "#/users/bob", "#/capacity/x", "#/submit/x", "#/jobs/a/b", "#/jobs/%E0%A4%A", "#/models/m/x/1", "#/models/m/versions"]) {
    assert.equal(parse(hash).page, "missing", hash);
  }
});
