// An example V2 inference request for a deployment, built from its model's inputs when they
// can be found: the deployment's V2 metadata through the API, else the `signature.json` that
// Loom's tracking helpers write beside a model; else a template to edit.
import { api, path, request } from "./api.js";

const TEMPLATE = { inputs: [{ name: "input", shape: [1, 4], datatype: "FP32", data: [0, 0, 0, 0] }] };
const MAX_EXAMPLE = 4096; // values; a larger input gets a template of the right name and type

// `signature.json` holds numpy's names; the V2 protocol has its own.
const V2_TYPES = {
  bool: "BOOL", uint8: "UINT8", uint16: "UINT16", uint32: "UINT32", uint64: "UINT64",
  int8: "INT8", int16: "INT16", int32: "INT32", int64: "INT64",
  float16: "FP16", float32: "FP32", float64: "FP64", bfloat16: "BF16", str: "BYTES", object: "BYTES",
};
export const v2Type = (datatype) => V2_TYPES[String(datatype).toLowerCase()] || String(datatype).toUpperCase();

function zero(datatype) {
  if (datatype === "BOOL") return false;
  if (datatype === "BYTES") return "";
  return 0;
}

/** A request of zeros for `inputs`: [{ name, datatype, shape }] (-1: any size, here 1). */
export function requestFor(inputs) {
  return {
    inputs: inputs.map(({ name, datatype: given, shape }) => {
      const datatype = v2Type(given);
      const dims = (shape || [1]).map((d) => (d > 0 ? d : 1));
      const size = dims.reduce((a, b) => a * b, 1);
      const fits = size <= MAX_EXAMPLE;
      return {
        name,
        shape: fits ? dims : [1, 1],
        datatype,
        data: Array.from({ length: fits ? size : 1 }, () => zero(datatype)),
      };
    }),
  };
}

async function inputsOf(d, signal) {
  const base = `/v1/models/${path(d.model)}/versions/${d.model_version}`;
  const version = await api(base, { signal });
  const signature = version.files?.find((f) => f.path === "signature.json" || f.path.endsWith("/signature.json"));
  if (signature) {
    const url = `${base}/download?file=${encodeURIComponent(signature.path)}`;
    return (await (await request(url, { signal })).json()).inputs;
  }
  // No signature beside the model: ask the deployment (where the server offers it).
  return (await api(`/v1/deployments/${path(d.name)}/metadata`, { signal })).inputs;
}

export async function exampleRequest(d, signal) {
  try {
    const inputs = await inputsOf(d, signal);
    return inputs?.length ? requestFor(inputs) : TEMPLATE;
  } catch {
    return TEMPLATE;
  }
}
