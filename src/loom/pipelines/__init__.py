"""Pipelines: DAGs of jobs, experiments, registry queries and deployments, run as one."""
