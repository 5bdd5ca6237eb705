"""Kubeflow's files, translated at the edge: Training Operator v1 jobs (`training`), Trainer v2's
TrainJob (`trainjob`), Katib's Experiment with a Kubernetes trial spec (`katib`) and KServe's
InferenceService (`kserve`). A pod template becomes a learner's command (`pods`) in the
environment its image implies (`images`); status is written back the Kubeflow way (`status`).
The handlers (`jobs`, ...) are what `loom apply` dispatches to."""
