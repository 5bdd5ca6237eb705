"""Model serving: runtimes (ONNX Runtime, TorchScript), one transport-neutral data plane, and
the V2 (Open Inference Protocol) and V1 REST protocols as thin adapters over it."""
