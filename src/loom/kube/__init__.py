"""Kubernetes objects for Loom's jobs: what a job attempt becomes on a cluster.

Pure rendering from the job's shape to typed models (the `kubernetes` client's, and Kubeflow
Trainer's for TrainJobs), serialised as the API expects them. No cluster is reached here: the
launcher submits what this renders, and `loom kubernetes render` prints it for review.
"""
